DELETE FROM almanac.console_sessions WHERE hash = $1
