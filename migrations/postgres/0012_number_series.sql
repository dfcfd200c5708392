-- SIFEN number series (company, timbrado, establishment, point, document type): the next number
-- to draw. Kept by the inline `number_series` projection from DocumentTransformed, which refuses
-- (and so rolls back the append of) any number that is not the series' next: numbers are drawn
-- without gaps and never twice, across instances.
CREATE TABLE number_series (
    tenant_id UUID NOT NULL,
    series TEXT NOT NULL,
    next_number BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, series)
);
