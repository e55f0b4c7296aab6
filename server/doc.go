// Package server runs one long-lived process per store and carries CLI
// invocations to it over a Unix socket, so that many agent processes share
// one open store and one commit pipeline instead of each opening the store,
// replaying its journal and syncing alone.
//
// # What travels
//
// A client does not send operations: it sends its whole invocation (the
// arguments, its working directory, the environment variables the CLI
// reads, whether its streams are terminals) and the server runs the very
// same command code on its open store, streaming the output back. Output,
// error codes and exit statuses are therefore identical with and without a
// server by construction, the way the Bazel client hands its command line
// to its server. Paths in arguments are resolved against the client's
// working directory, never the server's.
//
// # Wire format
//
// A connection carries frames in both directions:
//
//		+------------+---------+----------------------+
//		| length u32 | type u8 | payload [length]     |
//		+------------+---------+----------------------+
//
//	  - length: big-endian, the payload's size only. A frame longer than
//	    MaxPayload is refused before anything is allocated, so a malformed or
//	    hostile length cannot make either side allocate gigabytes.
//	  - type: one of the frame types below; an unknown type is a protocol
//	    error that ends the connection.
//
// An invocation on a connection:
//
//	client                         server
//	request {v, args, cwd, env} ─►
//	                            ◄─ stdout / stderr bytes (any number)
//	                            ◄─ stdin-want (if the command reads stdin)
//	stdin bytes, stdin-eof      ─►
//	                            ◄─ exit {status}   (or error {code, message})
//
// The exit and error payloads are JSON objects; stream payloads are raw
// bytes. A request payload is a JSON object or, from version 3, the binary
// encoding of binreq.go, told apart by its first byte. The output of a command that is not a stream (Config.Stream) is
// held until it ends, so a short command's output and exit status reach
// the client in one write.
//
// # Versions
//
// The request carries its version; the server speaks MinVersion to
// Version and answers any other with an error frame before running
// anything, so a client it does not understand runs the command itself.
//
//   - Version 1: one invocation a connection; stdin only when asked.
//   - Version 2: any number of invocations in sequence on one connection
//     (the next request follows the exit frame), and a request may carry
//     the command's whole stdin inline (stdin_inline, stdin), which saves
//     the round trip of stdin-want. Between requests a client may idle as
//     long as it likes; a server that stops sends an idle connection a
//     stopping error frame, so the client's next request is known not to
//     have run. So does every connection still queued on its socket when
//     it stops (Stop), after reading what the client sent: a close with
//     unread bytes would reset the connection instead.
//   - Version 3: version 2 with the request in the binary encoding,
//     which a server decodes without reflection. Client and Run speak it
//     (Run sends one invocation on a connection of its own). A server
//     that speaks only versions 1 and 2 refuses it as a protocol error
//     before running anything, so its client runs the command itself.
//
// A JSON request may name any version the server speaks.
//
// A client that reuses a connection and finds it closed before any answer
// gets ErrGone: it cannot tell a server killed while idle from one killed
// while running its request.

// # One server a store
//
// Serve holds an exclusive flock on serve.lock in the store directory for
// its whole life: a second server is refused with ErrRunning, and a lock
// left by a killed server is released by the kernel. The socket is bound
// under a temporary name, restricted to its owner, and renamed into place,
// so it is never connectable at serve.sock with wider permissions; a stale
// socket left by a killed server is replaced once the lock is held. Every
// connection's peer credentials (SO_PEERCRED) are checked: a peer of
// another user is refused.
//
// # When the server goes away
//
// Client.Run reports whether the request had been sent when the connection
// failed. A request never sent may be run by the client itself (the
// embedded fallback); a request sent to a server that then died may or may
// not have taken effect, and is reported as ErrGone, which is retryable: a
// commit's effects are idempotent to look up (its ref moves are
// compare-and-swap), so a retry either succeeds or says what is there.
package server
