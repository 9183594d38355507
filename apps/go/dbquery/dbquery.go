// Package dbquery is the /db endpoint's work for every Go stack: N range queries with
// database/sql and go-sql-driver/mysql, the way Go services query MySQL. apps/go/nethttp
// and apps/go/beego both use it (a `replace` in their go.mod points here).
//
// Connections: database/sql's pool, one per process, up to STACKRACE_DB_POOL open
// connections (default 16), all kept idle between requests. The query is one *sql.Stmt
// prepared on first use; database/sql prepares it on each pooled connection the first
// time that connection runs it, then only executes (binary protocol). Nothing is opened
// before the first /db request, so the server starts and serves /hello without a
// database. A broken connection is discarded by database/sql (its request answers 503)
// and the pool connects anew, so a restarted database is picked up by itself.
package dbquery

import (
	"database/sql"
	"encoding/json"
	"errors"
	"log"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

const (
	dbQuery      = "SELECT value FROM test WHERE id >= ? LIMIT 10"
	dbRowQuery   = "SELECT id, value FROM test WHERE id = ?" // /dbjson: one row
	dbQueriesMax = 500                                       // TechEmpower's multiple-queries rule: 1..500
)

var (
	dbMu       sync.Mutex
	dbPool     *sql.DB
	dbStmt     *sql.Stmt
	dbRowStmt  *sql.Stmt
	dbRows     = 1000000
	dbMaxStart = 999990
	dbLastErr  string
)

// Row is /dbjson's answer, serialised by encoding/json per request (experiment 003
// timed a query plus JSON serialisation).
type Row struct {
	ID    int     `json:"id"`
	Value float64 `json:"value"`
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}

// ParseQueries applies the contract: a missing or non-numeric value is 1, values are
// clamped to 1..500 (a number too long for uint64 is still a large number: 500).
func ParseQueries(value string) int {
	n, err := strconv.ParseUint(value, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return dbQueriesMax
	}
	if err != nil || n < 1 {
		return 1
	}
	return int(min(n, dbQueriesMax))
}

// openPool makes the pool on first use; the caller holds dbMu.
func openPool() error {
	if dbPool == nil {
		if rows, err := strconv.Atoi(os.Getenv("STACKRACE_DB_ROWS")); err == nil && rows > 9 {
			dbRows = rows
			dbMaxStart = rows - 9 // ids are 1..rows and a range of 10 must fit
		}
		size, err := strconv.Atoi(os.Getenv("STACKRACE_DB_POOL"))
		if err != nil || size < 1 {
			size = 16
		}
		cfg := mysql.NewConfig()
		cfg.User = envOr("STACKRACE_DB_USER", "stackrace")
		cfg.Passwd = os.Getenv("STACKRACE_DB_PASSWORD")
		cfg.Net = "tcp" // STACKRACE_DB_HOST is an IP: loopback TCP, as every stack uses
		cfg.Addr = envOr("STACKRACE_DB_HOST", "127.0.0.1") + ":" + envOr("STACKRACE_DB_PORT", "3306")
		cfg.DBName = envOr("STACKRACE_DB_NAME", "stackrace")
		cfg.Timeout = 5 * time.Second
		cfg.ReadTimeout = 30 * time.Second
		connector, err := mysql.NewConnector(cfg)
		if err != nil {
			return err
		}
		dbPool = sql.OpenDB(connector) // connects lazily, on first use
		dbPool.SetMaxOpenConns(size)
		dbPool.SetMaxIdleConns(size) // the default 2 would close and reopen under load
	}
	return nil
}

// prepare returns *stmt, preparing query once. Prepare needs a live connection: when the
// database is down it fails and the next request tries again.
func prepare(stmt **sql.Stmt, query string) (*sql.Stmt, error) {
	dbMu.Lock()
	defer dbMu.Unlock()
	if *stmt != nil {
		return *stmt, nil
	}
	if err := openPool(); err != nil {
		return nil, err
	}
	s, err := dbPool.Prepare(query)
	if err != nil {
		return nil, err
	}
	*stmt = s
	return s, nil
}

func openStmt() (*sql.Stmt, error) {
	return prepare(&dbStmt, dbQuery)
}

func querySum(stmt *sql.Stmt) (float64, error) {
	rows, err := stmt.Query(rand.IntN(dbMaxStart) + 1)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	total := 0.0
	for rows.Next() {
		var v float64
		if err := rows.Scan(&v); err != nil {
			return 0, err
		}
		total += v
	}
	return total, rows.Err()
}

// Response runs n queries: (200, the sum with six decimals) or (503, a short reason).
func Response(n int) (int, []byte) {
	stmt, err := openStmt()
	total := 0.0
	for i := 0; err == nil && i < n; i++ {
		var sum float64
		sum, err = querySum(stmt)
		total += sum
	}
	if err != nil {
		logDbError(err)
		return 503, []byte("database unavailable")
	}
	return 200, strconv.AppendFloat(make([]byte, 0, 24), total, 'f', 6, 64)
}

// RowResponse runs /dbjson's one query: (200, the row as JSON) or (503, a short reason).
func RowResponse() (int, []byte) {
	stmt, err := prepare(&dbRowStmt, dbRowQuery)
	var row Row
	if err == nil {
		err = stmt.QueryRow(rand.IntN(dbRows)+1).Scan(&row.ID, &row.Value)
	}
	var body []byte
	if err == nil {
		body, err = json.Marshal(&row)
	}
	if err != nil {
		logDbError(err)
		return 503, []byte("database unavailable")
	}
	return 200, body
}

// logDbError writes one line per new kind of failure: a stopped database under load
// would otherwise fill the log with the same line.
func logDbError(err error) {
	dbMu.Lock()
	defer dbMu.Unlock()
	if text := err.Error(); text != dbLastErr {
		dbLastErr = text
		log.Printf("/db: %s", text)
	}
}
