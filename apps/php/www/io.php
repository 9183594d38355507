<?php
// GET /io?ms=N: usleep blocks this PHP worker for N ms (default 10), as a backend call would.
$ms = isset($_GET['ms']) && ctype_digit($_GET['ms']) ? min((int) $_GET['ms'], 10000) : 10;
usleep($ms * 1000);
header('Content-Type: text/plain');
header('Content-Length: 2');
echo 'ok';
