package vfs

import (
	"encoding/binary"
	"strings"
	"sync"
)

// appendDirents appends the names of the linux_dirent64 records in buf,
// less "." and "..", to names. The names are substrings of one copy of buf:
// a string a name would be most of what listing a directory allocates.
func appendDirents(names []string, buf []byte) []string {
	const nameOff = 19 // d_ino 8, d_off 8, d_reclen 2, d_type 1
	text := string(buf)
	for off := 0; off+nameOff <= len(text); {
		reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
		if reclen < nameOff || off+reclen > len(text) {
			break // never from the kernel; a short record ends the parse
		}
		name := text[off+nameOff : off+reclen]
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		ino := binary.NativeEndian.Uint64(buf[off:])
		off += reclen
		if ino == 0 || name == "." || name == ".." || name == "" {
			continue
		}
		names = append(names, name)
	}
	return names
}

// direntBufs holds getdents buffers: a status lists every directory of a
// tree, and a fresh 32 KiB buffer each would be most of what it allocates.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
