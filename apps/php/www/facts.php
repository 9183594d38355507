<?php
// GET /_facts: what this PHP really runs with, for `stackrace verify` (the stack's
// `expect`): opcache on or off as the running worker sees it, not as a config file says.
// opcache_get_status() is false when opcache is off for this pool (or not loaded at all).
$status = function_exists('opcache_get_status') ? opcache_get_status(false) : false;
$body = json_encode([
    'opcache' => $status !== false && !empty($status['opcache_enabled']) ? 'on' : 'off',
    'sapi' => PHP_SAPI,
]);
header('Content-Type: application/json');
header('Content-Length: ' . strlen($body));
echo $body;
