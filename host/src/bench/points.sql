UPDATE accounts SET points = points + $2 WHERE id = $1
