<?php
// GET /hello. Content-Length is set so the response is not chunked, like the other stacks.
header('Content-Type: text/plain');
header('Content-Length: 13');
echo 'Hello, World!';
