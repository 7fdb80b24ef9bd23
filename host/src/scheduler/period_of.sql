-- One task's period unit, as stored.
SELECT period FROM ONLY almanac.schedules WHERE task = $1
