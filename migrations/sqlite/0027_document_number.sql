-- The list's search looks a reference up by its index: the number joins the CDC, external id and
-- buyer RUC, which have theirs (a search for a number walked a tenant's every document).
CREATE INDEX documents_number_idx ON documents (tenant_id, number) WHERE number IS NOT NULL;
