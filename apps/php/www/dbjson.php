<?php
// GET /dbjson: one row by a random id, answered as a JSON object {"id": N, "value": V}
// (TechEmpower's single-query test on this project's table), on the same connection as
// /db (persistent unless the stack's `persistent` param is off; see ../lib/db.php).
require __DIR__ . '/../lib/db.php';

// ids are 1..ROWS
$rows = max(1, (int) (getenv('STACKRACE_DB_ROWS') ?: 1000000));
$row = db_with(function (mysqli $db) use ($rows): array {
    $id = mt_rand(1, $rows);
    $result = $db->query('SELECT id, value FROM test WHERE id = ' . $id);
    $found = $result->fetch_row();
    $result->free();
    // the text protocol hands numbers over as strings: the JSON has them as numbers
    return ['id' => (int) $found[0], 'value' => (float) $found[1]];
}, '/dbjson');
if ($row !== null) {
    $body = json_encode($row);
    header('Content-Type: application/json');
    header('Content-Length: ' . strlen($body));
    echo $body;
}
