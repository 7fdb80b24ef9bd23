-- In the transaction that marks a message delivered: its reply job, through
-- almanac.enqueue as any enqueue ($1 the reply task, $2 the message's publish time as the
-- slot, $3 its key, $4 the delivery's outcome). A message delivered again after a crash
-- finds its first reply rolled back with its mark, so there is one reply per message.
SELECT almanac.enqueue($1, $2, $3, $4, NULL, true)
