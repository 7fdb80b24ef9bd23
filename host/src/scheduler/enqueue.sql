-- One job by identity, from an operator: through almanac.enqueue itself (migrations V7,
-- V10, V11), so `almanac enqueue` refuses what an application's enqueue refuses (a key
-- over 1,024 bytes, a payload over 1 MiB, a year outside 1 to 9999) and counts the job
-- on its period as any enqueue does. $5: the slot was checked against the task's
-- calendar by the host already (or the operator said --off-calendar).
SELECT almanac.enqueue($1, $2, $3, $4, NULL, $5)
