-- A delivered message whose reply job could not be made: why, for `almanac outbox`.
UPDATE almanac.outbox SET last_error = $2 WHERE id = $1
