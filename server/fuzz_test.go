package server

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReadFrame feeds arbitrary bytes to the frame reader and the request
// decoder (every version it speaks, JSON and binary, inline stdin
// included): nothing panics, nothing allocates past MaxPayload, and a
// request that decodes re-encodes, in the encoding it came in, to one that
// decodes the same.
func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	writeJSON(&b, fRequest, &Request{Version: Version, Args: []string{"log", "-n", "1"}, Cwd: "/w", Env: map[string]string{"SWARMOPS_JSON": "1"}})
	f.Add(b.Bytes())
	b.Reset()
	writeJSON(&b, fRequest, &Request{Version: Version, Args: []string{"commit", "-F", "-"}, Cwd: "/w", StdinInline: true, Stdin: []byte("put a = \"x\"\n")})
	writeFrame(&b, fRequest, []byte(`{"v":1,"args":["log"],"cwd":"/"}`))
	f.Add(b.Bytes())
	b.Reset()
	bin := appendBinaryRequest(nil, &Request{Args: []string{"commit", "-F", "-"}, Cwd: "/w", Env: map[string]string{"SWARMOPS_STORE": "/s"}, StdinInline: true, Stdin: []byte("put a = \"x\"\n")})
	writeFrame(&b, fRequest, bin)
	writeFrame(&b, fRequest, appendBinaryRequest(nil, &Request{Cwd: "/", StdoutTTY: true}))
	f.Add(b.Bytes())
	f.Add([]byte{0, 0, 0, 2, byte(fStdout), 'h', 'i'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, byte(fRequest)})
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for {
			typ, p, err := readFrame(r)
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrProtocol) {
					t.Fatalf("readFrame: untyped error %v", err)
				}
				return
			}
			if len(p) > MaxPayload {
				t.Fatalf("payload of %d bytes", len(p))
			}
			if typ != fRequest {
				continue
			}
			req, err := decodeRequest(p)
			if err != nil {
				if !errors.Is(err, ErrProtocol) && !errors.Is(err, errVersion) {
					t.Fatalf("decodeRequest: untyped error %v", err)
				}
				continue
			}
			var again bytes.Buffer
			if p[0] == binaryTag {
				if err := writeFrame(&again, fRequest, appendBinaryRequest(nil, req)); err != nil {
					t.Fatal(err)
				}
			} else if err := writeJSON(&again, fRequest, req); err != nil {
				t.Fatal(err)
			}
			_, p2, err := readFrame(&again)
			if err != nil {
				t.Fatal(err)
			}
			req2, err := decodeRequest(p2)
			if err != nil {
				t.Fatalf("a decoded request does not decode again: %v", err)
			}
			if req2.Cwd != req.Cwd || len(req2.Args) != len(req.Args) || len(req2.Env) != len(req.Env) ||
				req2.Version != req.Version || req2.StdinInline != req.StdinInline || !bytes.Equal(req2.Stdin, req.Stdin) {
				t.Fatalf("round trip changed the request: %+v vs %+v", req, req2)
			}
			for i := range req.Args {
				if req.Args[i] != req2.Args[i] {
					t.Fatalf("round trip changed argument %d: %q vs %q", i, req.Args[i], req2.Args[i])
				}
			}
			for k, v := range req.Env {
				if req2.Env[k] != v {
					t.Fatalf("round trip changed %s: %q vs %q", k, v, req2.Env[k])
				}
			}
		}
	})
}

// FuzzDecodeExit checks the exit frame's fast path against the JSON
// decoder: both accept the same payloads and read the same status.
func FuzzDecodeExit(f *testing.F) {
	for _, s := range []string{`{"status":0}`, `{"status":4}`, `{"status":-1}`, `{"status":01}`, `{"status":-0}`, `{"status":123456789}`, `{"status":1234567890}`, `{"status":}`, `{"status": 3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		got, err := decodeExit(p)
		var want exitMsg
		werr := decodeJSON(p, &want)
		if (err == nil) != (werr == nil) || got != want {
			t.Fatalf("%q: fast path %v, %v; decoder %v, %v", p, got, err, want, werr)
		}
		if err != nil && !errors.Is(err, ErrProtocol) {
			t.Fatalf("%q: untyped error %v", p, err)
		}
	})
}
