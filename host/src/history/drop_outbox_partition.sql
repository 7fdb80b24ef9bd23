SELECT almanac.drop_outbox_partition($1::text::regclass)
