<?php
// GET /db?queries=N: N plain queries, the random start written into the SQL text, on a
// persistent mysqli connection (see ../lib/db.php).
require __DIR__ . '/../lib/db.php';

db_serve(function (mysqli $db, int $queries, int $maxStart): float {
    $sum = 0.0;
    for ($i = 0; $i < $queries; $i++) {
        $result = $db->query('SELECT value FROM test WHERE id >= ' . mt_rand(1, $maxStart) . ' LIMIT 10');
        while ($row = $result->fetch_row()) {
            $sum += (float) $row[0];
        }
        $result->free();
    }
    return $sum;
});
