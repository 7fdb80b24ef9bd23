-- Which of the periods $2 the tasks $1 have not settled (V25's almanac.settled): a job of
-- a task that comes after them waits in those periods.
SELECT p FROM unnest($2::text[]) AS p WHERE NOT almanac.settled($1, p)
