-- How many documents a tenant has per Paraguay day of issue, company and status: what the
-- console's home, GET /v1/documents/stats and the kuatia_documents gauge read, instead of
-- counting the documents themselves (100 000 index entries a count at 100 000 documents).
-- Part of the `documents` projection (a rebuild empties it with the documents): triggers on
-- `documents` keep it, so every way a row is written (an event at a time, or a batch's rows
-- in one statement) counts alike. Documents are never deleted but by a rebuild, which empties
-- this table too; a count that falls to 0 is removed, so a rebuild that skips a status a
-- document passed through leaves the same rows.
CREATE TABLE document_counts (
    tenant_id  uuid   NOT NULL,
    day        date   NOT NULL,
    company_id uuid   NOT NULL,
    status     text   NOT NULL,
    n          bigint NOT NULL,
    PRIMARY KEY (tenant_id, day, company_id, status)
);

-- Paraguay's calendar day of an instant: UTC−3 all year since Law 7354 (2024), as
-- kuatia_domain::local_time::offset.
CREATE FUNCTION kuatia_paraguay_day(at timestamptz) RETURNS date
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ((at AT TIME ZONE 'UTC') - interval '3 hours')::date $$;

-- One statement's rows counted together (a batch of 500 documents is one upsert, not 500).
CREATE FUNCTION document_counts_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO document_counts AS c (tenant_id, day, company_id, status, n)
    SELECT tenant_id, kuatia_paraguay_day(issue_datetime), company_id, status, count(*)
    FROM new_rows GROUP BY 1, 2, 3, 4
    ON CONFLICT (tenant_id, day, company_id, status) DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$$;

-- A status change moves one count to another; a count left at 0 is removed (only a status a
-- document left can fall to 0).
CREATE FUNCTION document_counts_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO document_counts AS c (tenant_id, day, company_id, status, n)
    SELECT tenant_id, day, company_id, status, sum(d)::bigint
    FROM (
        SELECT o.tenant_id, kuatia_paraguay_day(o.issue_datetime) AS day, o.company_id,
               o.status AS was, n.status AS now
        FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE o.status <> n.status
    ) AS moved
    CROSS JOIN LATERAL (VALUES (moved.was, -1), (moved.now, 1)) AS delta(status, d)
    GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0
    ON CONFLICT (tenant_id, day, company_id, status) DO UPDATE SET n = c.n + excluded.n;
    IF FOUND THEN
        DELETE FROM document_counts c
        USING (SELECT DISTINCT tenant_id, kuatia_paraguay_day(issue_datetime) AS day, company_id, status
               FROM old_rows) AS o
        WHERE c.n = 0 AND c.tenant_id = o.tenant_id AND c.day = o.day
          AND c.company_id = o.company_id AND c.status = o.status;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_counted AFTER INSERT ON documents
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION document_counts_inserted();
CREATE TRIGGER documents_recounted AFTER UPDATE ON documents
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION document_counts_moved();

INSERT INTO document_counts (tenant_id, day, company_id, status, n)
SELECT tenant_id, kuatia_paraguay_day(issue_datetime), company_id, status, count(*)
FROM documents GROUP BY 1, 2, 3, 4;

-- Migration 0026's index served the counts read from the documents; nothing reads it now.
DROP INDEX documents_issued_status_idx;
