-- Move a schedule's cursor: the demo's simulated outage.
UPDATE ONLY almanac.schedules SET generated_through = $2, updated_at = now() WHERE task = $1
