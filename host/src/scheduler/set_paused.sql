-- `almanac pause` / `resume`: generated jobs still run; new slots wait while paused.
UPDATE ONLY almanac.schedules SET paused = $2, updated_at = now() WHERE task = $1
