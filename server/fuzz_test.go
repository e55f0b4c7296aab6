package server

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReadFrame feeds arbitrary bytes to the frame reader and the request
// decoder (every version it speaks, inline stdin included): nothing panics, nothing allocates past MaxPayload, and a request
// that decodes re-encodes to one that decodes the same.
func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	writeJSON(&b, fRequest, &Request{Version: Version, Args: []string{"log", "-n", "1"}, Cwd: "/w", Env: map[string]string{"SWARMOPS_JSON": "1"}})
	f.Add(b.Bytes())
	b.Reset()
	writeJSON(&b, fRequest, &Request{Version: Version, Args: []string{"commit", "-F", "-"}, Cwd: "/w", StdinInline: true, Stdin: []byte("put a = \"x\"\n")})
	writeFrame(&b, fRequest, []byte(`{"v":1,"args":["log"],"cwd":"/"}`))
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
			if err := writeJSON(&again, fRequest, req); err != nil {
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
		}
	})
}
