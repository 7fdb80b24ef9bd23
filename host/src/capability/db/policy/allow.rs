//! Which functions a plugin's SQL may call: an allowlist, because a deny list can only
//! name the dangers someone thought of (the list this replaced missed `ts_stat`, which
//! runs SQL given as text and so let a plugin take the host's role).
//!
//! Allowed: the built-in functions a task's SQL legitimately needs (operators are not
//! calls; these are the named functions and aggregates for math, strings, date/time,
//! JSON, arrays, ranges, full-text search, and sequences), unqualified or qualified with
//! `pg_catalog`, and any function qualified with a schema the plugin declares a table
//! in (the user's own functions; the database's EXECUTE privileges still apply).
//! Everything else is refused with the rule's name. The operator may add names
//! (`--allow-function`), except those in [`NEVER`], and remove them (`--deny-function`).

/// Names no configuration can allow: they run SQL given as text (which the policy
/// never sees), change the session the host owns, reach other sessions, files or
/// connections, or take the host's own locks. A trailing `*` matches any suffix.
pub const NEVER: &[&str] = &[
    "ts_stat",
    "ts_rewrite",
    "query_to_xml*",
    "cursor_to_xml*",
    "table_to_xml*",
    "schema_to_xml*",
    "database_to_xml*",
    "set_config",
    "current_setting",
    "setseed",
    "dblink*",
    "lo_*",
    "pg_read_*",
    "pg_ls_*",
    "pg_stat_file",
    "pg_file_*",
    "pg_notify",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "pg_signal_backend",
    "pg_reload_conf",
    "pg_advisory*",
    "pg_try_advisory*",
    "pg_logical_emit_message",
    "pg_create_*",
    "pg_drop_replication_slot",
    "pg_promote",
    "pg_switch_wal",
    "pg_rotate_logfile",
];

/// The built-in functions a plugin may call.
pub const ALLOWED: &[&str] = &[
    // Aggregates and window functions.
    "count", "sum", "avg", "min", "max", "bool_and", "bool_or", "every", "bit_and", "bit_or", "bit_xor",
    "string_agg", "array_agg", "json_agg", "jsonb_agg", "json_object_agg", "jsonb_object_agg",
    "json_agg_strict", "jsonb_agg_strict", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop",
    "var_samp", "corr", "covar_pop", "covar_samp", "regr_avgx", "regr_avgy", "regr_count", "regr_intercept",
    "regr_r2", "regr_slope", "regr_sxx", "regr_sxy", "regr_syy", "mode", "percentile_cont", "percentile_disc",
    "any_value", "row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead",
    "first_value", "last_value", "nth_value", "grouping",
    // Math.
    "abs", "cbrt", "ceil", "ceiling", "degrees", "div", "exp", "factorial", "floor", "gcd", "lcm", "ln", "log",
    "log10", "min_scale", "mod", "pi", "power", "pow", "radians", "round", "scale", "sign", "sqrt", "trim_scale",
    "trunc", "width_bucket", "random", "random_normal", "acos", "acosd", "asin", "asind", "atan", "atand",
    "atan2", "atan2d", "cos", "cosd", "cot", "cotd", "sin", "sind", "tan", "tand", "sinh", "cosh", "tanh",
    "asinh", "acosh", "atanh", "num_nonnulls", "num_nulls",
    // Conversions written as calls.
    "int2", "int4", "int8", "float4", "float8", "numeric", "text", "bool", "date", "time", "timestamp",
    "timestamptz", "interval", "varchar", "bpchar", "json", "jsonb", "uuid", "bytea",
    // Strings and bytes.
    "ascii", "bit_length", "btrim", "char_length", "character_length", "chr", "concat", "concat_ws",
    "convert_from", "convert_to", "decode", "encode", "format", "initcap", "left", "length", "lower", "lpad",
    "ltrim", "md5", "normalize", "is_normalized", "octet_length", "overlay", "position", "quote_ident",
    "quote_literal", "quote_nullable", "regexp_count", "regexp_instr", "regexp_like", "regexp_match",
    "regexp_matches", "regexp_replace", "regexp_split_to_array", "regexp_split_to_table", "regexp_substr",
    "repeat", "replace", "reverse", "right", "rpad", "rtrim", "split_part", "starts_with", "string_to_array",
    "string_to_table", "strpos", "substr", "substring", "to_ascii", "to_hex", "translate", "unistr", "upper",
    "sha224", "sha256", "sha384", "sha512", "get_bit", "get_byte", "set_bit", "set_byte", "bit_count",
    "to_char", "to_number", "gen_random_uuid", "similar_to_escape", "like_escape",
    // Date and time.
    "age", "clock_timestamp", "date_bin", "date_part", "date_trunc", "extract", "isfinite", "justify_days",
    "justify_hours", "justify_interval", "make_date", "make_interval", "make_time", "make_timestamp",
    "make_timestamptz", "now", "statement_timestamp", "timeofday", "transaction_timestamp", "to_date",
    "to_timestamp", "timezone", "overlaps", "generate_series",
    // JSON.
    "to_json", "to_jsonb", "array_to_json", "row_to_json", "json_build_array", "jsonb_build_array",
    "json_build_object", "jsonb_build_object", "json_object", "jsonb_object", "json_array_elements",
    "jsonb_array_elements", "json_array_elements_text", "jsonb_array_elements_text", "json_array_length",
    "jsonb_array_length", "json_each", "jsonb_each", "json_each_text", "jsonb_each_text", "json_extract_path",
    "jsonb_extract_path", "json_extract_path_text", "jsonb_extract_path_text", "json_object_keys",
    "jsonb_object_keys", "json_populate_record", "jsonb_populate_record", "json_populate_recordset",
    "jsonb_populate_recordset", "json_to_record", "jsonb_to_record", "json_to_recordset", "jsonb_to_recordset",
    "json_strip_nulls", "jsonb_strip_nulls", "jsonb_set", "jsonb_set_lax", "jsonb_insert", "jsonb_pretty",
    "json_typeof", "jsonb_typeof", "jsonb_path_exists", "jsonb_path_match", "jsonb_path_query",
    "jsonb_path_query_array", "jsonb_path_query_first", "jsonb_path_exists_tz", "jsonb_path_match_tz",
    "jsonb_path_query_tz", "jsonb_path_query_array_tz", "jsonb_path_query_first_tz",
    // Arrays.
    "array_append", "array_cat", "array_dims", "array_fill", "array_length", "array_lower", "array_ndims",
    "array_position", "array_positions", "array_prepend", "array_remove", "array_replace", "array_to_string",
    "array_upper", "cardinality", "trim_array", "unnest", "generate_subscripts",
    // Ranges.
    "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange", "lower", "upper", "isempty",
    "lower_inc", "upper_inc", "lower_inf", "upper_inf", "range_merge", "multirange",
    // Full-text search (not ts_stat / ts_rewrite, which run SQL given as text).
    "to_tsvector", "to_tsquery", "plainto_tsquery", "phraseto_tsquery", "websearch_to_tsquery", "ts_rank",
    "ts_rank_cd", "ts_headline", "setweight", "strip", "numnode", "querytree", "tsvector_to_array",
    "array_to_tsvector", "ts_delete", "ts_filter",
    // Sequences behind the plugin's own serial columns, and type inspection.
    "nextval", "currval", "pg_typeof",
];

/// A name list entry: `pg_sleep` or a prefix `pg_sleep*`.
pub fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// Whether `name` is in [`NEVER`].
pub fn never(name: &str) -> bool {
    NEVER.iter().any(|p| matches(p, name))
}
