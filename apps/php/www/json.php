<?php
// GET /json. json_encode writes compact JSON; the object is put together around the
// encoded value so every stack sends the contract's exact bytes: {"message": "Hello, World!"}
$body = '{"message": ' . json_encode('Hello, World!') . '}';
header('Content-Type: application/json');
header('Content-Length: ' . strlen($body));
echo $body;
