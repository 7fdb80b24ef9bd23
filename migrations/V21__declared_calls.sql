-- The functions each plugin declares it calls (`task-info.calls`, WIT 0.3.0), as the
-- catalog had them when a host last loaded it: signature, volatility, SECURITY DEFINER,
-- owning extension, whether it runs SQL given as text. `almanac plugins` shows them.
ALTER TABLE almanac.plugins ADD COLUMN calls jsonb NOT NULL DEFAULT '[]';
