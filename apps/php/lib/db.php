<?php
// Shared by www/db.php (plain queries), www/db_prepared.php (a prepared statement) and
// www/dbjson.php (one row as JSON). GET /db?queries=N: N range queries on one persistent
// mysqli connection per PHP worker (or a new one per request: the stack's `persistent`
// param), summed and printed with six decimals.

// errors as exceptions (PHP 8.1's default, said here so a php.ini cannot turn them off)
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);

const DB_QUERIES_MAX = 500;

// a missing or non-numeric queries is 1, and it is clamped to 1..500 (TechEmpower's rule)
function db_queries(): int
{
    $q = $_GET['queries'] ?? '';
    return is_string($q) && ctype_digit($q) ? max(1, min((int) $q, DB_QUERIES_MAX)) : 1;
}

// ids are 1..ROWS and a range of 10 must fit: starts are 1..ROWS-9
function db_max_start(): int
{
    return max(1, (int) (getenv('STACKRACE_DB_ROWS') ?: 1000000) - 9);
}

// Whether connections persist between requests: the stack's `persistent` param, passed
// as STACKRACE_PHP_PERSISTENT (on unless it says off). Experiment 001 compared the two.
function db_persistent(): bool
{
    return getenv('STACKRACE_PHP_PERSISTENT') !== 'off';
}

// 'p:' makes the connection persistent: this PHP worker keeps it open between requests.
// On reuse mysqli resets it (COM_CHANGE_USER); when that fails, as after a database
// restart, it connects anew, so the stack recovers by itself. Without 'p:' every request
// connects (TCP handshake, authentication) and db_serve closes the connection at its end.
function db_connect(): mysqli
{
    return new mysqli(
        (db_persistent() ? 'p:' : '') . (getenv('STACKRACE_DB_HOST') ?: '127.0.0.1'),  // an IP: TCP
        getenv('STACKRACE_DB_USER') ?: 'stackrace',
        getenv('STACKRACE_DB_PASSWORD') ?: '',
        getenv('STACKRACE_DB_NAME') ?: 'stackrace',
        (int) (getenv('STACKRACE_DB_PORT') ?: 3306)
    );
}

function db_reply(int $status, string $body): void
{
    http_response_code($status);
    header('Content-Type: text/plain');
    header('Content-Length: ' . strlen($body));  // not chunked, like the other stacks
    echo $body;
}

// Runs $work on a connection; closes a connection that is not persistent (a persistent
// one stays with this PHP worker). Returns $work's result, or null after a 503.
function db_with(callable $work, string $what)
{
    $db = null;
    try {
        $db = db_connect();
        $result = $work($db);
    } catch (mysqli_sql_exception $e) {
        error_log($what . ': ' . $e->getMessage());
        db_reply(503, 'database unavailable');
        return null;
    } finally {
        if ($db !== null && !db_persistent()) {
            $db->close();
        }
    }
    return $result;
}

// $work(mysqli $db, int $queries, int $maxStart): float, the sum of the values read
function db_serve(callable $work): void
{
    $sum = db_with(fn (mysqli $db) => $work($db, db_queries(), db_max_start()), '/db');
    if ($sum !== null) {
        db_reply(200, sprintf('%.6F', $sum));  // %F: never the locale's decimal comma
    }
}
