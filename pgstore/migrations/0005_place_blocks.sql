-- Places in blocks (pgstore's Config.MaxKeysPerGroup). A store now takes a
-- group's places in the statement of the decision that needs one, a block
-- of up to 64 at a time written to sluice_usage_groups at once, and hands
-- them out to its own new keys: a row whose place was taken so writes
-- key_group NULL. Only a row that names its group takes its place through
-- the trigger, one at a time, as before; the trigger is no longer called
-- for the others (its call alone cost about 6 us of a first insert).
--
-- key_group is so NULL for rows written before migration 0003, by a writer
-- that caps nothing, and by a writer that took the row's place beforehand.
DROP TRIGGER sluice_usage_take_place ON sluice_usage;

CREATE TRIGGER sluice_usage_take_place AFTER INSERT ON sluice_usage
    FOR EACH ROW WHEN (NEW.key_group IS NOT NULL) EXECUTE FUNCTION sluice_usage_take_place();
