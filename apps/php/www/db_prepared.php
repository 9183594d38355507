<?php
// GET /db?queries=N: the statement is prepared once per request and executed N times with
// a bound random start (the binary protocol), on a persistent mysqli connection (see
// ../lib/db.php). The stack php-fpm-nginx-prepared serves this script as /db.
require __DIR__ . '/../lib/db.php';

db_serve(function (mysqli $db, int $queries, int $maxStart): float {
    $stmt = $db->prepare('SELECT value FROM test WHERE id >= ? LIMIT 10');
    $start = 0;
    $value = 0.0;
    $stmt->bind_param('i', $start);
    $stmt->bind_result($value);
    $sum = 0.0;
    for ($i = 0; $i < $queries; $i++) {
        $start = mt_rand(1, $maxStart);
        $stmt->execute();
        while ($stmt->fetch()) {
            $sum += $value;
        }
    }
    $stmt->close();  // a persistent connection would otherwise keep it prepared for nothing
    return $sum;
});
