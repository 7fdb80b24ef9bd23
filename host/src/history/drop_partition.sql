SELECT almanac.drop_job_partition($1::text::regclass)
