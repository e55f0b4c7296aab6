package vfs

import (
	"bytes"
	"encoding/binary"
	"sync"
)

// appendDirents appends the names of the linux_dirent64 records in buf,
// less "." and "..", to names. It packs the names to the front of buf
// (which it overwrites: a name never lies before where it is packed to),
// and the names are substrings of one copy of them: a string a name would
// be most of what listing a directory allocates, and a copy of the whole
// buffer would carry every record's header and padding.
func appendDirents(names []string, buf []byte) []string {
	const nameOff = 19 // d_ino 8, d_off 8, d_reclen 2, d_type 1
	var ends []int     // where each packed name ends
	packed := 0
	for off := 0; off+nameOff <= len(buf); {
		reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
		if reclen < nameOff || off+reclen > len(buf) {
			break // never from the kernel; a short record ends the parse
		}
		name := buf[off+nameOff : off+reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		ino := binary.NativeEndian.Uint64(buf[off:])
		off += reclen
		if ino == 0 || len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		packed += copy(buf[packed:], name)
		ends = append(ends, packed)
	}
	text := string(buf[:packed])
	start := 0
	for _, end := range ends {
		names = append(names, text[start:end])
		start = end
	}
	return names
}

// direntBufs holds getdents buffers: a status lists every directory of a
// tree, and a fresh 32 KiB buffer each would be most of what it allocates.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
