-- The usage counters of fixed-window quotas: one row per key and period.
-- The row a decision counts in is also the ledger row that keeps the
-- period's usage after the period ends; nothing deletes it.
CREATE TABLE sluice_usage (
    -- SHA-256 of key: an index entry of 32 bytes whatever the key's length
    -- (a key may be 4096 bytes, more than a B-tree entry holds).
    key_hash     bytea       NOT NULL CHECK (octet_length(key_hash) = 32),
    -- The period counted: [period_start, period_end). Computed by the
    -- caller, so that a calendar period (a month in a time zone) fits as
    -- well as a window aligned to the Unix epoch.
    period_start timestamptz NOT NULL,
    period_end   timestamptz NOT NULL,
    -- The key as the caller gave it: any bytes, so bytea, not text.
    key          bytea       NOT NULL,
    -- The units admitted in the period, less the units refunded.
    count        bigint      NOT NULL,
    -- The allowance in force when the row was last admitted to.
    quota        bigint      NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key_hash, period_start),
    CHECK (period_end > period_start),
    -- An admission never takes count above the allowance in force, and a
    -- refund never below zero.
    CHECK (count >= 0 AND count <= quota)
);

-- Exporting the ledger by period (Ledger).
CREATE INDEX sluice_usage_period_start ON sluice_usage (period_start);
