package engine

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// SQLite is SQLite (C, through mattn/go-sqlite3) in WAL mode. Sync "FULL" is
// the durable peer; "NORMAL" syncs only at checkpoints, so a power loss may
// take acknowledged commits: it is a marked non-durable reference line.
//
// The schema mirrors the SwarmOps index: rows in insertion order, a unique
// index by id, an index by delta hash, and a ref table.
type SQLite struct{ Sync string }

// Name implements Engine.
func (e SQLite) Name() string {
	if e.Sync == "FULL" {
		return "sqlite"
	}
	return "sqlite-" + e.Sync
}

// Durable implements Engine.
func (e SQLite) Durable() bool { return e.Sync == "FULL" }

// MultiProcess implements Engine.
func (SQLite) MultiProcess() bool { return true }

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS changesets(
  seq INTEGER PRIMARY KEY, id BLOB NOT NULL UNIQUE, delta BLOB NOT NULL,
  gen INTEGER NOT NULL, parents BLOB, payload BLOB);
CREATE INDEX IF NOT EXISTS changesets_delta ON changesets(delta);
CREATE TABLE IF NOT EXISTS refs(name TEXT PRIMARY KEY, id BLOB NOT NULL) WITHOUT ROWID;`

// Open implements Engine. Every connection of the pool is a session of its
// own, so writers goroutines contend as separate connections would.
func (e SQLite) Open(dir string, writers int) (Store, error) {
	dsn := fmt.Sprintf("file:%s?_journal_mode=WAL&_synchronous=%s&_busy_timeout=10000&_txlock=immediate",
		filepath.Join(dir, "db.sqlite"), e.Sync)
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", dir, err)
	}
	if writers < 1 {
		writers = 1
	}
	db.SetMaxOpenConns(writers + 2)
	db.SetMaxIdleConns(writers + 2)
	if _, err := db.Exec(sqliteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: schema in %s: %w", dir, mapSQLite(err))
	}
	return &sqliteStore{db: db}, nil
}

type sqliteStore struct{ db *sql.DB }

func mapSQLite(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	return err
}

func (s *sqliteStore) Commit(t *Txn) (Key, error) {
	tx, err := s.db.Begin()
	if err != nil {
		return Key{}, mapSQLite(err)
	}
	defer tx.Rollback()
	if err := sqliteInsert(tx, t); err != nil {
		return Key{}, err
	}
	if err := tx.Commit(); err != nil {
		return Key{}, mapSQLite(err)
	}
	return t.ID, nil
}

func sqliteInsert(tx *sql.Tx, t *Txn) error {
	gen := uint64(1)
	var parents []byte
	if t.HasParent {
		var pg uint64
		if err := tx.QueryRow(`SELECT gen FROM changesets WHERE id=?`, t.Parent[:]).Scan(&pg); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("%w: parent %x", ErrNotFound, t.Parent[:6])
			}
			return mapSQLite(err)
		}
		gen = pg + 1
		parents = t.Parent[:]
	}
	if _, err := tx.Exec(`INSERT INTO changesets(id, delta, gen, parents, payload) VALUES(?,?,?,?,?)`,
		t.ID[:], t.Delta[:], gen, parents, t.Payload); err != nil {
		return mapSQLite(err)
	}
	if t.HasParent {
		r, err := tx.Exec(`UPDATE refs SET id=? WHERE name=? AND id=?`, t.ID[:], t.Ref, t.Parent[:])
		if err != nil {
			return mapSQLite(err)
		}
		if n, _ := r.RowsAffected(); n != 1 {
			return fmt.Errorf("%w: %s", ErrConflict, t.Ref)
		}
	} else if _, err := tx.Exec(`INSERT INTO refs(name, id) VALUES(?,?)`, t.Ref, t.ID[:]); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrConflict, t.Ref, mapSQLite(err))
	}
	return nil
}

// Load inserts in transactions of 20,000 changesets, with the same
// statements as Commit.
func (s *sqliteStore) Load(chains [][]Txn) ([][]Key, error) {
	return loadBatches(chains, 20000, func(batch []staged) error {
		tx, err := s.db.Begin()
		if err != nil {
			return mapSQLite(err)
		}
		for _, st := range batch {
			if err := sqliteInsert(tx, st.t); err != nil {
				tx.Rollback()
				return err
			}
		}
		return mapSQLite(tx.Commit())
	})
}

func (s *sqliteStore) Head(ref string) (Key, bool, error) {
	var b []byte
	err := s.db.QueryRow(`SELECT id FROM refs WHERE name=?`, ref).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return Key{}, false, nil
	}
	if err != nil {
		return Key{}, false, mapSQLite(err)
	}
	var k Key
	copy(k[:], b)
	return k, true, nil
}

// View holds one connection. SQLite runs each statement outside a
// transaction on a fresh snapshot of its own, so the lookups pay what an
// application's lookups pay.
func (s *sqliteStore) View() (View, error) {
	c, err := s.db.Conn(bg)
	if err != nil {
		return nil, mapSQLite(err)
	}
	v := &sqliteView{c: c}
	for _, q := range []struct {
		p   **sql.Stmt
		sql string
	}{
		{&v.get, `SELECT gen, payload FROM changesets WHERE id=?`},
		{&v.prefix, `SELECT id FROM changesets WHERE id>=? AND id<? LIMIT 2`},
		{&v.delta, `SELECT id FROM changesets WHERE delta=? LIMIT 2`},
		{&v.deltaOf, `SELECT delta FROM changesets WHERE id=?`},
	} {
		st, err := c.PrepareContext(bg, q.sql)
		if err != nil {
			v.Close()
			return nil, mapSQLite(err)
		}
		*q.p = st
	}
	return v, nil
}

type sqliteView struct {
	c                           *sql.Conn
	get, prefix, delta, deltaOf *sql.Stmt
}

func (v *sqliteView) Get(id Key) (bool, error) {
	var gen uint64
	var payload []byte
	err := v.get.QueryRow(id[:]).Scan(&gen, &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Fresh runs the lookup in an explicit deferred read transaction of its own
// (BEGIN, not the pool's BEGIN IMMEDIATE, which would take the write lock).
func (v *sqliteView) Fresh(id Key) (bool, error) {
	if _, err := v.c.ExecContext(bg, "BEGIN"); err != nil {
		return false, err
	}
	ok, err := v.Get(id)
	if _, cerr := v.c.ExecContext(bg, "COMMIT"); cerr != nil && err == nil {
		err = cerr
	}
	return ok, err
}

func (v *sqliteView) count(rows *sql.Rows, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

func (v *sqliteView) Prefix(p []byte) (int, error) {
	end := prefixEnd(p)
	if end == nil {
		end = bytes.Repeat([]byte{0xff}, 33)
	}
	return v.count(v.prefix.Query(p, end))
}

func (v *sqliteView) ByDelta(h Key) (int, error) { return v.count(v.delta.Query(h[:])) }

func (v *sqliteView) DeltaOf(id Key) (Key, error) {
	var b []byte
	var k Key
	if err := v.deltaOf.QueryRow(id[:]).Scan(&b); err != nil {
		return k, err
	}
	copy(k[:], b)
	return k, nil
}

func (v *sqliteView) Close() error {
	for _, st := range []*sql.Stmt{v.get, v.prefix, v.delta, v.deltaOf} {
		if st != nil {
			st.Close()
		}
	}
	return v.c.Close()
}

// Settle checkpoints the WAL into the database and truncates it.
func (s *sqliteStore) Settle() error {
	_, err := s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

func (s *sqliteStore) Close() error { return s.db.Close() }
