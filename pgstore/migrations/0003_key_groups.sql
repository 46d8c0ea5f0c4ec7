-- The distinct keys counted in each group of keys and period, for the cap
-- on them (pgstore's Config.MaxKeysPerGroup): a key's first row in a
-- period takes one of its group's places, or its insert fails when none
-- is left, so a client that chooses descriptor values cannot grow
-- sluice_usage without bound. Pruned with sluice_usage (Prune).
CREATE TABLE sluice_usage_groups (
    -- SHA-256 of the group's name (Config.Group of the key).
    group_hash   bytea       NOT NULL CHECK (octet_length(group_hash) = 32),
    period_start timestamptz NOT NULL,
    period_end   timestamptz NOT NULL,
    -- The rows of the group inserted in the period.
    keys         bigint      NOT NULL CHECK (keys >= 0),
    PRIMARY KEY (group_hash, period_start),
    CHECK (period_end > period_start)
);

-- Pruning closed periods (Prune).
CREATE INDEX sluice_usage_groups_period_start ON sluice_usage_groups (period_start);

-- The group a row's key counts in: SHA-256 of its name; NULL for rows
-- written before this migration, or by a writer that caps nothing.
ALTER TABLE sluice_usage ADD COLUMN key_group bytea CHECK (octet_length(key_group) = 32);

-- After a row is inserted (a key's first admission in a period; an
-- admission that adds to the row fires nothing), it takes a place in its
-- group's period, of at most the session's sluice.max_keys_per_group
-- (unset or 0: no bound), or fails the statement with SQLSTATE SLK01, so
-- that the decision counts and writes nothing.
CREATE FUNCTION sluice_usage_take_place() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cap bigint := coalesce(nullif(current_setting('sluice.max_keys_per_group', true), '')::bigint, 0);
BEGIN
    IF NEW.key_group IS NULL OR cap <= 0 THEN
        RETURN NULL;
    END IF;
    INSERT INTO sluice_usage_groups AS g (group_hash, period_start, period_end, keys)
    VALUES (NEW.key_group, NEW.period_start, NEW.period_end, 1)
    ON CONFLICT (group_hash, period_start) DO UPDATE
    SET keys = g.keys + 1, period_end = greatest(g.period_end, excluded.period_end)
    WHERE g.keys < cap;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'SLK01', MESSAGE = 'sluice: too many keys in the group for the period';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER sluice_usage_take_place AFTER INSERT ON sluice_usage
    FOR EACH ROW EXECUTE FUNCTION sluice_usage_take_place();
