-- Whether a row's period is kept as the ledger after it ends: true for the
-- periods of billable limits (sluice.Limit.Billable), which stay until
-- pruned; false for the others, which Sweep deletes once they end, so that
-- keys a client chooses (one per descriptor value) leave no lasting rows.
-- Rows written before this migration were all kept, and stay so.
ALTER TABLE sluice_usage ADD COLUMN billable boolean NOT NULL DEFAULT true;

-- Finding the ended periods of limits that are not billable (Sweep).
CREATE INDEX sluice_usage_not_billable ON sluice_usage (period_end) WHERE NOT billable;
