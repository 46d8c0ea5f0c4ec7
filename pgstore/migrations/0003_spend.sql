-- sluice_spend is one decision, in one round trip whether it admits or not.
-- It adds p_cost to the period's row if the count stays within p_quota
-- (inserting the row if there is none and p_cost <= p_quota) and returns
-- the count after the decision, whether it admitted, and the period's end
-- (the row's on an admission, p_end on a refusal).
--
-- A refusal on the last committed count is made first, by a plain read: it
-- takes no lock and writes nothing, so a client past its quota neither
-- queues on the row behind admissions nor costs the database a write. It
-- is as exact as a locked refusal: the count it read was the committed
-- count when its statement began, and a refusal changes nothing.
--
-- Otherwise the upsert decides. Under READ COMMITTED, ON CONFLICT DO UPDATE
-- locks the latest version of a conflicting row, a concurrent writer's
-- included, before it checks the WHERE, and keeps it locked to the end of
-- the transaction even when the WHERE refuses. The read after a refusal
-- there is a new statement with a new snapshot, so it reads that same
-- locked version: the count the decision was refused on. (A read in the
-- same statement as the upsert, a CTE, would read the statement's
-- snapshot, which misses a row a concurrent decision inserted.)
CREATE OR REPLACE FUNCTION sluice_spend(
    p_key_hash bytea, p_start timestamptz, p_end timestamptz, p_key bytea,
    p_cost bigint, p_quota bigint,
    OUT spent_count bigint, OUT admitted boolean, OUT spent_end timestamptz)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    admitted := false;
    spent_end := p_end;
    SELECT u.count INTO spent_count FROM sluice_usage AS u
    WHERE u.key_hash = p_key_hash AND u.period_start = p_start;
    IF FOUND AND spent_count + p_cost > p_quota THEN
        RETURN;
    END IF;
    INSERT INTO sluice_usage AS u (key_hash, period_start, period_end, key, count, quota)
    SELECT p_key_hash, p_start, p_end, p_key, p_cost, p_quota WHERE p_cost <= p_quota
    ON CONFLICT (key_hash, period_start) DO UPDATE
    SET count = u.count + excluded.count, period_end = excluded.period_end,
        quota = excluded.quota, updated_at = now()
    WHERE u.count + excluded.count <= excluded.quota
    RETURNING u.count, u.period_end INTO spent_count, spent_end;
    IF FOUND THEN
        admitted := true;
        RETURN;
    END IF;
    spent_end := p_end;
    SELECT u.count INTO spent_count FROM sluice_usage AS u
    WHERE u.key_hash = p_key_hash AND u.period_start = p_start;
    spent_count := coalesce(spent_count, 0);
END
$$;
