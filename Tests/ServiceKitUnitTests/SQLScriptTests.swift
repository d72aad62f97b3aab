import ServiceKit
import Testing

@Suite("Splitting SQL scripts into statements")
struct SQLScriptTests {
    @Test("statements split at top-level semicolons; blank and comment-only pieces are dropped")
    func simple() {
        let script = """
            -- a comment; with a semicolon
            CREATE TABLE a (id int);
            /* block; comment */ CREATE TABLE b (id int);

            ;
            """
        #expect(
            SQLScript.statements(in: script) == [
                "-- a comment; with a semicolon\nCREATE TABLE a (id int)",
                "/* block; comment */ CREATE TABLE b (id int)",
            ]
        )
    }

    @Test("semicolons inside strings, identifiers and dollar-quoted bodies do not split")
    func quoting() {
        let function = """
            CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $body$
            BEGIN RAISE EXCEPTION 'no; never'; END;
            $body$
            """
        let script = """
            INSERT INTO t VALUES ('it''s; fine', "odd;name", E'back\\'slash;');
            \(function);
            SELECT $$a;b$$, $1
            """
        #expect(
            SQLScript.statements(in: script) == [
                "INSERT INTO t VALUES ('it''s; fine', \"odd;name\", E'back\\'slash;')", function, "SELECT $$a;b$$, $1",
            ]
        )
    }

    @Test("nested block comments")
    func nestedComments() {
        #expect(
            SQLScript.statements(in: "/* a /* b; */ c; */ SELECT 1; SELECT 2") == [
                "/* a /* b; */ c; */ SELECT 1", "SELECT 2",
            ])
    }
}
