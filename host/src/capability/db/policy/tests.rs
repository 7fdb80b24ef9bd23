use super::*;

fn check(policy: &Policy, sql: &str) -> Result<(), Refusal> {
    policy.check_uncached(sql, &["public.my_score".to_owned()])
}

#[test]
fn queries_and_writes_pass() {
    let policy = Policy::default();
    for sql in [
        "SELECT 1",
        "select id from accounts where id > $1 order by id limit $2",
        "  -- leading comment\n INSERT INTO t VALUES ($1);",
        "/* a /* nested */ comment */ UPDATE t SET x = 1",
        "WITH a AS (SELECT 1) SELECT * FROM a",
        "WITH d AS (DELETE FROM t RETURNING id) INSERT INTO u SELECT id FROM d",
        "(SELECT 1) UNION (SELECT 2)",
        "SELECT 'a;b', \"we;ird\", $$x;y$$, $tag$;COMMIT;$tag$, E'\\';'",
        "DELETE FROM t WHERE a = $1 ;  -- trailing\n",
        "SELECT now(), count(*), coalesce(max(x), 0) FROM t FOR UPDATE SKIP LOCKED",
        "SELECT extract(epoch FROM now()), date_trunc('day', $1::timestamptz) AT TIME ZONE 'UTC', trim(both ' ' FROM x)",
        "SELECT jsonb_build_object('a', 1) ->> 'a', array_agg(x ORDER BY x) FILTER (WHERE x > 0), row_number() OVER ()",
        "SELECT substring(x FROM 2 FOR 3), position('a' IN x), lower(x), greatest(1, 2), nullif(x, '') FROM t",
        "SELECT * FROM unnest($1::bigint[]) AS k, generate_series(1, 3) g, t TABLESAMPLE SYSTEM (10)",
        "SELECT pg_catalog.lower('A'), public.my_score(x) FROM t",
        "INSERT INTO t SELECT nextval('t_id_seq')",
    ] {
        assert_eq!(check(&policy, sql), Ok(()), "{sql}");
    }
}

#[test]
fn host_owned_statements_are_refused_with_their_rule() {
    let policy = Policy::default();
    let cases: &[(&str, Refusal)] = &[
        ("COMMIT", Refusal::TransactionControl("COMMIT".into())),
        ("  rollback", Refusal::TransactionControl("ROLLBACK".into())),
        ("/* hi */ begin", Refusal::TransactionControl("BEGIN".into())),
        ("SAVEPOINT x", Refusal::TransactionControl("SAVEPOINT".into())),
        ("SET ROLE postgres", Refusal::Session("SET ROLE".into())),
        ("RESET ROLE", Refusal::Session("RESET ROLE".into())),
        ("set local search_path = evil", Refusal::Session("SET SEARCH_PATH".into())),
        ("LISTEN x", Refusal::Session("LISTEN".into())),
        ("NOTIFY x", Refusal::Session("NOTIFY".into())),
        ("COPY t TO PROGRAM 'sh'", Refusal::Copy),
        ("DROP TABLE accounts", Refusal::Ddl("DROP".into())),
        ("CREATE TABLE x (a int)", Refusal::Ddl("CREATE TABLE".into())),
        ("CREATE TABLE x AS SELECT 1", Refusal::Ddl("CREATE TABLE AS".into())),
        ("GRANT ALL ON accounts TO public", Refusal::Ddl("GRANT".into())),
        ("TRUNCATE accounts", Refusal::Ddl("TRUNCATE".into())),
        ("SELECT * INTO copy_of FROM accounts", Refusal::SelectInto),
        ("DO $$ BEGIN END $$", Refusal::NotAllowed("DO".into())),
        ("CALL p()", Refusal::NotAllowed("CALL".into())),
        ("EXPLAIN ANALYZE DELETE FROM t", Refusal::NotAllowed("EXPLAIN".into())),
        ("SELECT 1; COMMIT", Refusal::MultipleStatements(2)),
        ("SELECT 1;;SELECT 2", Refusal::MultipleStatements(2)),
        ("", Refusal::Empty),
        ("-- only a comment", Refusal::Empty),
    ];
    for (sql, want) in cases {
        assert_eq!(check(&policy, sql).as_ref(), Err(want), "{sql}");
    }
}

#[test]
fn functions_are_allowed_by_list_in_every_position() {
    let policy = Policy::default();
    for sql in [
        "SELECT set_config('role', 'postgres', true)",
        "SELECT pg_catalog.set_config('search_path', 'evil', false)",
        "SELECT * FROM set_config('a.b', 'c', true)",
        "VALUES (set_config('a.b', 'c', true))",
        "SELECT ARRAY[set_config('a.b', 'c', true)]",
        "SELECT 1 LIMIT length(set_config('a.b', 'c', true))",
        "UPDATE t SET x = (SELECT set_config('a.b', 'c', true))",
        "INSERT INTO t VALUES (1) ON CONFLICT (id) DO UPDATE SET x = set_config('a.b', 'c', true)",
        "WITH a AS (SELECT set_config('a.b', 'c', true)) SELECT 1",
        "SELECT CASE WHEN true THEN set_config('a.b', 'c', true) END",
        "SELECT \"set_config\"('a.b', 'c', true)",
        "SELECT x FROM t ORDER BY set_config('a.b', 'c', true)",
        "SELECT count(*) FILTER (WHERE set_config('a.b', 'c', true) = '') FROM t",
    ] {
        assert_eq!(check(&policy, sql), Err(Refusal::Never("set_config".into())), "{sql}");
    }
    // The attack review's bypass: SQL given as text, which no parser can see into.
    let ts_stat = "SELECT * FROM ts_stat('SELECT to_tsvector(set_config(''role'', ''none'', true))')";
    assert_eq!(check(&policy, ts_stat), Err(Refusal::Never("ts_stat".into())));
    assert_eq!(check(&policy, "SELECT ts_rewrite('a'::tsquery, 'SELECT 1')"), Err(Refusal::Never("ts_rewrite".into())));
    assert_eq!(check(&policy, "SELECT query_to_xml('RESET ROLE', true, true, '')"), Err(Refusal::Never("query_to_xml".into())));
    assert_eq!(check(&policy, "SELECT pg_read_file('/etc/passwd')"), Err(Refusal::Never("pg_read_file".into())));
    assert_eq!(check(&policy, "SELECT pg_terminate_backend(1)"), Err(Refusal::Never("pg_terminate_backend".into())));
    assert_eq!(check(&policy, "SELECT pg_advisory_lock(1)"), Err(Refusal::Never("pg_advisory_lock".into())));
    // Not dangerous by name, just not on the list: refused all the same.
    assert_eq!(check(&policy, "SELECT pg_sleep(1)"), Err(Refusal::Function("pg_sleep".into())));
    assert_eq!(check(&policy, "SELECT some_new_function(1)"), Err(Refusal::Function("some_new_function".into())));
    assert_eq!(check(&policy, "SELECT pg_catalog.pg_backend_pid()"), Err(Refusal::Function("pg_backend_pid".into())));
    assert_eq!(check(&policy, "SELECT a.b.c()"), Err(Refusal::Function("a.b.c".into())));
    // Attribute notation calls a one-argument function of any type: `(x).f` is `f(x)`.
    assert_eq!(check(&policy, "SELECT ('role'::text).current_setting"), Err(Refusal::Never("current_setting".into())));
    assert_eq!(check(&policy, "SELECT (4242::bigint).pg_advisory_lock"), Err(Refusal::Never("pg_advisory_lock".into())));
    assert_eq!(check(&policy, "SELECT (0.1::float8).pg_sleep"), Err(Refusal::Function("pg_sleep".into())));
    assert_eq!(check(&policy, "SELECT ('SELECT 1'::text).ts_stat"), Err(Refusal::Never("ts_stat".into())));
    assert_eq!(check(&policy, "SELECT t.current_setting FROM (SELECT 'role'::text) t"), Err(Refusal::Never("current_setting".into())));
    // The never-list holds in any schema (an extension's functions live in the user's).
    assert_eq!(check(&policy, "SELECT public.dblink_exec('x', 'y')"), Err(Refusal::Never("public.dblink_exec".into())));
    // Columns and composite fields are not calls.
    for sql in ["SELECT a.points FROM accounts a", "SELECT (a).points FROM accounts a", "SELECT public.accounts.points FROM public.accounts"] {
        assert_eq!(check(&policy, sql), Ok(()), "{sql}");
    }
    assert_eq!(check(&policy, "SELECT * FROM t TABLESAMPLE evil (1)"), Err(Refusal::NotAllowed("TABLESAMPLE evil".into())));
}

#[test]
fn functions_of_the_database_only_by_declaration() {
    let policy = Policy::default();
    let calls = ["app.score".to_owned(), "app.===".to_owned(), "public.crosstab".to_owned()];
    assert_eq!(policy.check_uncached("SELECT app.score(1)", &calls), Ok(()));
    assert_eq!(policy.check_uncached("SELECT 1 OPERATOR(app.===) 2", &calls), Ok(()));
    // A schema the plugin declares a table (or another function) in allows nothing else.
    assert_eq!(policy.check_uncached("SELECT app.credit(7, 1000000)", &calls), Err(Refusal::Function("app.credit".into())));
    assert_eq!(policy.check_uncached("SELECT other.score(1)", &calls), Err(Refusal::Function("other.score".into())));
    assert_eq!(policy.check_uncached("SELECT almanac.x()", &calls), Err(Refusal::Function("almanac.x".into())));
    assert_eq!(policy.check_uncached("SELECT 1 OPERATOR(other.===) 2", &calls), Err(Refusal::Operator("other.===".into())));
    assert_eq!(policy.check_uncached("SELECT 1 OPERATOR(pg_catalog.+) 2", &calls), Ok(()));
    let sorted = "SELECT x FROM t ORDER BY x USING OPERATOR(other.<<<)";
    assert_eq!(policy.check_uncached(sorted, &calls), Err(Refusal::Operator("other.<<<".into())));
    assert_eq!(policy.check_uncached("SELECT x FROM t ORDER BY x USING <", &calls), Ok(()));
    // Unqualified, a declared function is not found: calls are written as declared.
    assert_eq!(policy.check_uncached("SELECT score(1)", &calls), Err(Refusal::Function("score".into())));
    // Text-SQL runners: refused with their own rule, unless declared.
    let crosstab = "SELECT * FROM public.crosstab('SELECT set_config(''role'', ''none'', false)') AS t(a text)";
    assert_eq!(policy.check_uncached(crosstab, &[]), Err(Refusal::Never("public.crosstab".into())));
    assert_eq!(policy.check_uncached(crosstab, &calls), Ok(()));
    assert_eq!(policy.check_uncached("SELECT public.dblink_exec('x', 'y')", &calls), Err(Refusal::Never("public.dblink_exec".into())));
    assert!(Refusal::Never("public.dblink_exec".into()).to_string().contains("declares it in `calls`"));
}

#[test]
fn attribute_notation_calls_only_declared_functions() {
    let policy = Policy::default();
    let mut functions = Functions::default();
    for (name, schema) in [("credit", "public"), ("credit", "app"), ("full_name", "public")] {
        functions.attribute.entry(name.to_owned()).or_default().insert(schema.to_owned());
    }
    policy.learn_functions(functions);
    let credit = "SELECT (7).credit";
    assert_eq!(policy.check_uncached(credit, &[]), Err(Refusal::AttributeCall("credit".into())));
    assert_eq!(policy.check_uncached("SELECT a.credit FROM accounts a", &[]), Err(Refusal::AttributeCall("credit".into())));
    // Declared in one schema, the name still reaches the other's through the search path.
    assert_eq!(policy.check_uncached(credit, &["app.credit".to_owned()]), Err(Refusal::AttributeCall("credit".into())));
    assert_eq!(policy.check_uncached(credit, &["app.credit".to_owned(), "public.credit".to_owned()]), Ok(()));
    // A column no function of the database is named like is only a column.
    assert_eq!(policy.check_uncached("SELECT a.points FROM accounts a", &[]), Ok(()));
}

#[test]
fn a_builtins_name_overloaded_by_the_database_is_called_qualified() {
    let policy = Policy::default();
    let mut functions = Functions::default();
    functions.any.entry("round".to_owned()).or_default().insert("public".to_owned());
    policy.learn_functions(functions);
    // public.round(float8, int) beats pg_catalog.round(numeric, int) for a float8.
    assert_eq!(policy.check_uncached("SELECT round(x::float8, 2) FROM t", &[]), Err(Refusal::Shadowed("round".into(), "public".into())));
    assert_eq!(policy.check_uncached("SELECT pg_catalog.round(x::float8, 2) FROM t", &[]), Ok(()));
    assert_eq!(policy.check_uncached("SELECT lower(x) FROM t", &[]), Ok(()));
}

#[test]
fn the_allowlist_is_configurable_except_for_never() {
    let policy = Policy::new(&["pg_sleep".into()], &["lower".into()]).unwrap();
    assert_eq!(check(&policy, "SELECT pg_sleep(0)"), Ok(()));
    assert_eq!(check(&policy, "SELECT lower('A')"), Err(Refusal::Function("lower".into())));
    assert_eq!(check(&policy, "SELECT set_config('a.b', 'c', true)"), Err(Refusal::Never("set_config".into())));
    for never in ["ts_stat", "set_config", "query_to_xml", "pg_read_file", "dblink_exec"] {
        let error = Policy::new(&[never.into()], &[]).err().unwrap_or_default();
        assert!(error.contains("never available"), "{never}: {error}");
    }
}

#[test]
fn syntax_errors_keep_the_servers_words_and_code() {
    let refusal = check(&Policy::default(), "SELECT * FROM WHERE").unwrap_err();
    assert_eq!(refusal.to_string(), "syntax error at or near \"WHERE\"");
    assert_eq!(refusal.sqlstate().as_deref(), Some("42601"));
}

#[test]
fn oversized_deep_and_unterminated_input_is_refused_not_crashing() {
    let policy = Policy::default();
    let big = format!("SELECT '{}'", "x".repeat(MAX_SQL_BYTES));
    assert!(matches!(check(&policy, &big), Err(Refusal::TooLong(_))));
    for sql in ["SELECT 'open", "SELECT $a$ open", "SELECT /* open", "SELECT E'\\", "$", "$1", "É", "SELECT '\0'"] {
        assert!(check(&policy, sql).is_err(), "{sql}");
    }
    let deep = format!("SELECT {}1{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(matches!(check(&policy, &deep), Err(Refusal::TooComplex(_))), "{:?}", check(&policy, &deep));
    // The attack review's 10 KB chain of `+` aborted the host; now it is a refusal.
    let chain = format!("SELECT 1{}", " + 1".repeat(5_000));
    assert!(matches!(check(&policy, &chain), Err(Refusal::TooComplex(_))), "{:?}", check(&policy, &chain));
    // A legitimate chain of 60 terms (refused by a protobuf decoding limit before).
    let sixty = format!("SELECT 1{}", " + $1".repeat(59));
    assert_eq!(check(&policy, &sixty), Ok(()));
    // A long flat list is too many nodes, refused without building a copy of the tree.
    let array = format!("SELECT ARRAY[{}]", vec!["1"; 120_000].join(","));
    assert!(matches!(check(&policy, &array), Err(Refusal::TooComplex(_))));
}

#[test]
fn setup_may_only_shape_declared_tables_standing_alone() {
    let policy = Policy::default();
    let writable = vec!["points_ledger".to_owned(), "app.audit".to_owned()];
    let declared = vec!["points_ledger".to_owned(), "app.audit".to_owned(), "accounts".to_owned()];
    let setup = |sql: &str| {
        let (sql, writable, declared) = (sql.to_owned(), writable.clone(), declared.clone());
        let allowed = policy.allowed.clone();
        permitted(&policy.parser.run_blocking(move || decide_setup(&sql, &allowed, &writable, &declared)), &[], &Functions::default())
    };
    for sql in [
        "CREATE TABLE IF NOT EXISTS points_ledger (id bigint PRIMARY KEY, at timestamptz DEFAULT now())",
        "CREATE INDEX IF NOT EXISTS points_ledger_at ON points_ledger (at)",
        "ALTER TABLE points_ledger ADD COLUMN IF NOT EXISTS note text",
        "CREATE TABLE IF NOT EXISTS app.audit (id int, account bigint REFERENCES accounts (id))",
    ] {
        assert_eq!(setup(sql), Ok(()), "{sql}");
    }
    let cases: &[(&str, Refusal)] = &[
        ("CREATE TABLE accounts (id int)", Refusal::SetupTable("accounts".into())),
        ("CREATE INDEX ON almanac.jobs (key)", Refusal::SetupTable("almanac.jobs".into())),
        ("DROP TABLE points_ledger", Refusal::SetupStatement("DROP".into())),
        ("CREATE TABLE points_ledger () INHERITS (almanac.jobs)", Refusal::SetupClause("INHERITS".into())),
        ("CREATE TABLE points_ledger () INHERITS (accounts)", Refusal::SetupClause("INHERITS".into())),
        ("CREATE TABLE points_ledger PARTITION OF accounts DEFAULT", Refusal::SetupClause("PARTITION OF".into())),
        ("CREATE TABLE points_ledger OF some_type", Refusal::SetupClause("OF <type>".into())),
        ("CREATE TABLE points_ledger (LIKE almanac.jobs)", Refusal::SetupClause("LIKE".into())),
        ("CREATE TABLE points_ledger (id int REFERENCES secrets (id))", Refusal::SetupReference("secrets".into())),
        ("CREATE TABLE points_ledger (id int, FOREIGN KEY (id) REFERENCES almanac.jobs (x))", Refusal::SetupReference("almanac.jobs".into())),
        ("ALTER TABLE points_ledger ADD FOREIGN KEY (id) REFERENCES secrets (id)", Refusal::SetupReference("secrets".into())),
        ("ALTER TABLE points_ledger ADD COLUMN s int REFERENCES secrets (id)", Refusal::SetupReference("secrets".into())),
        ("CREATE TABLE points_ledger (x text DEFAULT set_config('search_path', 'evil', false))", Refusal::Never("set_config".into())),
    ];
    for (sql, want) in cases {
        assert_eq!(setup(sql).as_ref(), Err(want), "{sql}");
    }
    assert!(matches!(setup("ALTER TABLE points_ledger OWNER TO evil"), Err(Refusal::SetupStatement(_))));
}
