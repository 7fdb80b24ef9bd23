-- Forget an earlier demo run's jobs, slots and ledger.
DELETE FROM almanac.jobs WHERE task = 'daily-points';
DELETE FROM ONLY almanac.slots WHERE task = 'daily-points';
TRUNCATE points_ledger;
