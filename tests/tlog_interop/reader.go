// Command reader is an independent verifier of a C2SP tiled transparency log
// (c2sp.org/tlog-tiles, c2sp.org/tlog-checkpoint, c2sp.org/signed-note).
//
// It was written from the C2SP specifications and the Go team's
// golang.org/x/mod/sumdb/{note,tlog} packages only, not from agentmesh's
// Rust code, so the Rust integration tests can check the node's log with
// code that somebody else wrote.
//
// Build (GOPATH mode with Debian's golang-golang-x-mod-dev; no network):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=/tmp/gocache \
//	    go build -o /tmp/tlogreader ./tests/tlog_interop/reader.go
//
// Usage:
//
//	tlogreader -url http://127.0.0.1:PORT -vkey 'name+hexid+base64key' \
//	    [-origin ORIGIN] [-old FILE] [-save FILE]
//
// On success it prints one line of JSON to stdout and exits 0. On any failure
// it prints "tlogreader: FAIL <stage>: <reason>" to stderr and exits 1, where
// stage is one of usage, key, checkpoint, tiles, entries, inclusion,
// consistency or save.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const (
	tileHeight = 8 // C2SP tiles are always 2^8 = 256 hashes wide
	tileWidth  = 1 << tileHeight
	maxBody    = 1 << 20 // limit for checkpoints, keys, tiles and proofs
	// The largest entry bundle the format allows: 256 entries of at most
	// 65535 bytes, each behind a 2-byte length.
	maxBundle  = tileWidth * (2 + 65535)
	sampleSize = 64 // inclusion proofs to check
)

var (
	baseURL string
	client  = &http.Client{Timeout: 30 * time.Second}
	// emptyRoot is the RFC 6962 hash of the empty tree. (tlog.TreeHash
	// instead defines the empty tree's hash as all zeros.)
	emptyRoot = tlog.Hash(sha256.Sum256(nil))
)

// fail reports a failure in the named stage and exits 1.
func fail(stage, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "tlogreader: FAIL %s: %s\n", stage, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// get fetches baseURL+path, requiring status 200 and at most limit bytes.
func get(stage, path string, limit int64) []byte {
	resp, err := client.Get(baseURL + path)
	if err != nil {
		fail(stage, "%v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fail(stage, "GET %s: status %s", path, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		fail(stage, "GET %s: %v", path, err)
	}
	if int64(len(body)) > limit {
		fail(stage, "GET %s: body larger than %d bytes", path, limit)
	}
	return body
}

// getJSON fetches path and decodes it into v. tlog.Hash decodes itself from
// a base64 JSON string; untagged field names match JSON keys case-insensitively.
func getJSON(stage, path string, v interface{}) {
	if err := json.Unmarshal(get(stage, path, maxBody), v); err != nil {
		fail(stage, "GET %s: bad JSON: %v", path, err)
	}
}

// checkpoint is a verified, parsed c2sp.org/tlog-checkpoint.
type checkpoint struct {
	origin string
	size   int64
	root   tlog.Hash
}

// openCheckpoint verifies msg as a signed note and parses its text. note.Open
// ignores signatures by unknown keys (as signed-note requires), but fails if
// v's signature does not verify or if no signature by v is present. We parse
// the text ourselves: tlog.ParseTree expects the Go sumdb's first line.
func openCheckpoint(stage string, msg []byte, v note.Verifier) checkpoint {
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		fail(stage, "signature: %v", err)
	}
	// Origin, tree size, root hash, then optional extension lines; none empty.
	lines := strings.Split(strings.TrimSuffix(n.Text, "\n"), "\n")
	if len(lines) < 3 {
		fail(stage, "note text has %d lines, want at least 3", len(lines))
	}
	for i, l := range lines {
		if l == "" {
			fail(stage, "line %d of the note text is empty", i+1)
		}
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		fail(stage, "bad tree size line %q", lines[1])
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil || root.String() != lines[2] {
		fail(stage, "bad root hash line %q", lines[2])
	}
	if size == 0 && root != emptyRoot {
		fail(stage, "empty tree has root %v, want SHA-256(\"\") = %v", root, emptyRoot)
	}
	return checkpoint{origin: lines[0], size: size, root: root}
}

// tilePath maps a tlog.Tile to its URL path. Go's Tile.Path() gives
// "tile/8/L/N[.p/W]" and "tile/8/data/N[.p/W]"; C2SP has no height element
// and calls the data level "entries".
func tilePath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", tileHeight))
	if t.L == -1 {
		p = "entries/" + strings.TrimPrefix(p, "data/")
	}
	return "/log/tile/" + p
}

// httpTiles is a tlog.TileReader that fetches hash tiles over HTTP exactly as
// requested. It caches them in memory to avoid refetching; the cache is not
// trusted, as TileHashReader checks tiles on every ReadHashes call.
type httpTiles map[tlog.Tile][]byte

func (r httpTiles) Height() int                     { return tileHeight }
func (r httpTiles) SaveTiles([]tlog.Tile, [][]byte) {}

func (r httpTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if r[t] == nil {
			d := get("tiles", tilePath(t), maxBody)
			if len(d) != t.W*tlog.HashSize {
				fail("tiles", "%s: %d bytes, want %d", tilePath(t), len(d), t.W*tlog.HashSize)
			}
			r[t] = d
		}
		out[i] = r[t]
	}
	return out, nil
}

// parseBundle splits an entry bundle into exactly want uint16-length-prefixed
// entries, with no trailing bytes.
func parseBundle(b []byte, want int) ([][]byte, error) {
	var entries [][]byte
	for len(b) > 0 {
		if len(b) < 2 || len(b) < 2+int(binary.BigEndian.Uint16(b)) {
			return nil, fmt.Errorf("entry %d is truncated", len(entries))
		}
		n := 2 + int(binary.BigEndian.Uint16(b))
		entries, b = append(entries, b[2:n]), b[n:]
	}
	if len(entries) != want {
		return nil, fmt.Errorf("%d entries, want %d", len(entries), want)
	}
	return entries, nil
}

// bundleWidth is the width of the level-0 tile or entry bundle holding entry
// n in a tree of the given size: 256, or size mod 256 for the last one.
func bundleWidth(size, n int64) int {
	if start := n - n%tileWidth; size-start < tileWidth {
		return int(size - start)
	}
	return tileWidth
}

// sameHashes reports whether two proofs are identical.
func sameHashes(a, b []tlog.Hash) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func main() {
	flag.StringVar(&baseURL, "url", "", "base URL of the node, e.g. http://127.0.0.1:8080")
	vkey := flag.String("vkey", "", "trusted verifier key <name>+<hex id>+<base64 key>")
	origin := flag.String("origin", "", "expected checkpoint origin line (optional)")
	oldFile := flag.String("old", "", "saved checkpoint the current one must be consistent with (optional)")
	saveFile := flag.String("save", "", "write the verified checkpoint to this file (optional)")
	flag.Parse()
	baseURL = strings.TrimSuffix(baseURL, "/")
	if baseURL == "" || *vkey == "" {
		fail("usage", "-url and -vkey are required")
	}
	verifier, err := note.NewVerifier(*vkey)
	if err != nil {
		fail("usage", "bad -vkey: %v", err)
	}
	// The key the node publishes must be the one we were told to trust.
	if got := strings.TrimRight(string(get("key", "/log/key", maxBody)), "\r\n"); got != *vkey {
		fail("key", "/log/key serves %q, want %q", got, *vkey)
	}

	// 1. The checkpoint: signature, syntax, origin.
	raw := get("checkpoint", "/log/checkpoint", maxBody)
	cp := openCheckpoint("checkpoint", raw, verifier)
	if *origin != "" && cp.origin != *origin {
		fail("checkpoint", "origin %q, want %q", cp.origin, *origin)
	}
	size, root := cp.size, cp.root

	// 2. The tree hash computed from the hash tiles must be the root.
	tiles := httpTiles{}
	hr := tlog.TileHashReader(tlog.Tree{N: size, Hash: root}, tiles)
	if size > 0 {
		if th, err := tlog.TreeHash(size, hr); err != nil || th != root {
			fail("tiles", "tree hash from tiles is %v (%v), checkpoint root is %v", th, err, root)
		}
	}

	// 3. Entries. Fetch every bundle covering [0,size), full ones and the
	// final partial one, and rebuild the whole tree in memory from the
	// entries alone (tlog.StoredHashes); its root must be the checkpoint's.
	var stored []tlog.Hash
	mem := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(stored)) {
				return nil, fmt.Errorf("no stored hash %d", x)
			}
			out[i] = stored[x]
		}
		return out, nil
	})
	leaves := make([]tlog.Hash, size)
	for start := int64(0); start < size; start += tileWidth {
		bt := tlog.Tile{H: tileHeight, L: -1, N: start / tileWidth, W: bundleWidth(size, start)}
		entries, err := parseBundle(get("entries", tilePath(bt), maxBundle), bt.W)
		if err != nil {
			fail("entries", "bundle %s: %v", tilePath(bt), err)
		}
		for i, e := range entries {
			n := start + int64(i)
			leaves[n] = tlog.RecordHash(e) // RFC 6962: SHA-256(0x00 || entry)
			hs, err := tlog.StoredHashes(n, e, mem)
			if err != nil {
				fail("entries", "hashing entry %d: %v", n, err)
			}
			stored = append(stored, hs...)
		}
	}
	if size > 0 {
		if th, err := tlog.TreeHash(size, mem); err != nil || th != root {
			// Name the first entry whose leaf hash the served tiles disagree with.
			for n := int64(0); n < size; n++ {
				t := tlog.Tile{H: tileHeight, L: 0, N: n / tileWidth, W: bundleWidth(size, n)}
				if d, _ := tiles.ReadTiles([]tlog.Tile{t}); !bytes.Equal(d[0][n%tileWidth*tlog.HashSize:][:tlog.HashSize], leaves[n][:]) {
					fail("entries", "entry %d hashes to %v, %s disagrees; entries do not hash to the checkpoint root %v", n, leaves[n], tilePath(t), root)
				}
			}
			fail("entries", "entries [0,%d) hash to %v (%v), checkpoint root is %v", size, th, err, root)
		}
	}

	// Every hash tile the log must serve at this size (full tiles, plus the
	// partial tile of width floor(size/256^L) mod 256 at each level) must
	// equal the tile recomputed from the entries. We check this ourselves
	// because tlog.TileHashReader cannot be relied on to reject a bad tile:
	// its ReadHashes checks only tiles[len(stx):] against their parents, so
	// when several tree-hash indexes share a tile (e.g. at size 70000) some
	// fetched full tiles are never checked. We saw this with x/mod 0.7.0
	// (Debian bookworm); x/mod v0.40.0's release notes describe it as
	// CVE-2026-56865 (go.dev/issue/80744), "tile verification bypass".
	for L := 0; size>>(tileHeight*L) > 0; L++ {
		hashesAtL := size >> (tileHeight * L)
		for N := int64(0); N*tileWidth < hashesAtL; N++ {
			t := tlog.Tile{H: tileHeight, L: L, N: N, W: tileWidth}
			if rest := hashesAtL - N*tileWidth; rest < tileWidth {
				t.W = int(rest)
			}
			want, err := tlog.ReadTileData(t, mem)
			if err != nil {
				fail("tiles", "recomputing %s: %v", tilePath(t), err)
			}
			if got, _ := tiles.ReadTiles([]tlog.Tile{t}); !bytes.Equal(got[0], want) {
				fail("tiles", "%s differs from the tile recomputed from the entries", tilePath(t))
			}
			if L > 0 {
				continue
			}
			// As a client would: the leaf hashes read through
			// TileHashReader must be the entries' leaf hashes.
			idx := make([]int64, t.W)
			for i := range idx {
				idx[i] = tlog.StoredHashIndex(0, N*tileWidth+int64(i))
			}
			hs, err := hr.ReadHashes(idx)
			if err != nil {
				fail("tiles", "reading leaf hashes of %s: %v", tilePath(t), err)
			}
			for i, h := range hs {
				if n := N*tileWidth + int64(i); h != leaves[n] {
					fail("entries", "entry %d hashes to %v, level-0 tile says %v", n, leaves[n], h)
				}
			}
		}
	}

	// 4. Inclusion proofs for a sample of indexes (all if size <= 64, else
	// 64 spread evenly from first to last): the server's proof must be for
	// our root, carry the entry's leaf hash, verify, and equal the proof
	// computed from the tiles.
	var sample []int64
	for i := int64(0); i < size && i < sampleSize; i++ {
		if size <= sampleSize {
			sample = append(sample, i)
		} else {
			sample = append(sample, i*(size-1)/(sampleSize-1))
		}
	}
	for _, i := range sample {
		var ip struct {
			Index, Size int64
			Root, Leaf  tlog.Hash
			Proof       []tlog.Hash
		}
		getJSON("inclusion", fmt.Sprintf("/log/proof/inclusion?index=%d&size=%d", i, size), &ip)
		if ip.Index != i || ip.Size != size || ip.Root != root {
			fail("inclusion", "index %d: answer is for index %d size %d root %v", i, ip.Index, ip.Size, ip.Root)
		}
		if ip.Leaf != leaves[i] {
			fail("inclusion", "index %d: leaf %v, but the entry hashes to %v", i, ip.Leaf, leaves[i])
		}
		if err := tlog.CheckRecord(ip.Proof, size, root, i, ip.Leaf); err != nil {
			fail("inclusion", "index %d: server proof does not verify: %v", i, err)
		}
		mine, err := tlog.ProveRecord(size, i, hr)
		if err != nil {
			fail("inclusion", "index %d: proving from tiles: %v", i, err)
		}
		if !sameHashes(ip.Proof, mine) {
			fail("inclusion", "index %d: server proof differs from the proof computed from tiles", i)
		}
	}

	// 5. Consistency with a previously saved checkpoint: the tree must not
	// shrink, and both a proof we compute from the tiles and the server's
	// proof must show the old tree is a prefix of the current one.
	consistent := false
	if *oldFile != "" {
		oldRaw, err := os.ReadFile(*oldFile)
		if err != nil {
			fail("consistency", "%v", err)
		}
		old := openCheckpoint("consistency", oldRaw, verifier)
		if old.origin != cp.origin {
			fail("consistency", "old origin %q != current origin %q", old.origin, cp.origin)
		}
		if old.size > size {
			fail("consistency", "tree shrank from %d to %d", old.size, size)
		}
		if old.size > 0 {
			mine, err := tlog.ProveTree(size, old.size, hr)
			if err != nil {
				fail("consistency", "proving %d -> %d from tiles: %v", old.size, size, err)
			}
			if err := tlog.CheckTree(mine, size, root, old.size, old.root); err != nil {
				fail("consistency", "old tree (size %d, root %v) is not a prefix of the current tree (size %d, root %v) by tiles: %v",
					old.size, old.root, size, root, err)
			}
			var cr struct {
				From, Size int64
				FromRoot   tlog.Hash `json:"from_root"`
				Root       tlog.Hash
				Proof      []tlog.Hash
			}
			getJSON("consistency", fmt.Sprintf("/log/proof/consistency?from=%d&size=%d", old.size, size), &cr)
			if cr.From != old.size || cr.Size != size || cr.FromRoot != old.root || cr.Root != root {
				fail("consistency", "answer is for %d (%v) -> %d (%v)", cr.From, cr.FromRoot, cr.Size, cr.Root)
			}
			if err := tlog.CheckTree(cr.Proof, size, root, old.size, old.root); err != nil {
				fail("consistency", "server proof %d -> %d does not verify: %v", old.size, size, err)
			}
			if !sameHashes(cr.Proof, mine) {
				fail("consistency", "server proof differs from the proof computed from tiles")
			}
		}
		consistent = true
	}

	if *saveFile != "" {
		if err := os.WriteFile(*saveFile, raw, 0o644); err != nil {
			fail("save", "%v", err)
		}
	}
	out, _ := json.Marshal(map[string]interface{}{
		"origin":              cp.origin,
		"size":                size,
		"root":                base64.StdEncoding.EncodeToString(root[:]),
		"entries_checked":     size,
		"inclusion_checked":   len(sample),
		"consistency_checked": consistent,
	})
	fmt.Println(string(out))
}
