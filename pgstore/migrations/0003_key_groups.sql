-- The distinct keys counted in each group of keys and period, for the cap
-- on them (Config.MaxKeysPerGroup): a key's first decision in a period
-- takes one of its group's places, or is refused when none is left, so a
-- client that chooses descriptor values cannot grow sluice_usage without
-- bound. Pruned with sluice_usage (Prune).
CREATE TABLE sluice_usage_groups (
    -- SHA-256 of the group's name (Config.Group of the key).
    group_hash   bytea       NOT NULL CHECK (octet_length(group_hash) = 32),
    period_start timestamptz NOT NULL,
    period_end   timestamptz NOT NULL,
    -- The keys that took a place in the period: at least the group's rows
    -- of the period (two first decisions of one key that race may both
    -- take one).
    keys         bigint      NOT NULL CHECK (keys >= 0),
    PRIMARY KEY (group_hash, period_start),
    CHECK (period_end > period_start)
);

-- Pruning closed periods (Prune).
CREATE INDEX sluice_usage_groups_period_start ON sluice_usage_groups (period_start);
