module stackrace/apps/go/nethttp

go 1.24.0

require github.com/go-sql-driver/mysql v1.10.1 // indirect

require filippo.io/edwards25519 v1.2.0 // indirect

require stackrace/apps/go/dbquery v0.0.0

replace stackrace/apps/go/dbquery => ../dbquery
