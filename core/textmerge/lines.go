package textmerge

import "bytes"

// binarySniffLen is how many leading bytes IsBinary inspects. It is git's
// figure, so a file git would refuse to line-merge is refused here too.
const binarySniffLen = 8000

// IsBinary reports whether data is binary by git's rule: a NUL byte in its
// first 8000 bytes. Binary content is never merged or diffed by lines.
func IsBinary(data []byte) bool {
	if len(data) > binarySniffLen {
		data = data[:binarySniffLen]
	}
	return bytes.IndexByte(data, 0) >= 0
}

// splitLines cuts data into lines that keep their terminators, so that
// joining the result gives data back byte for byte. Only the last line may
// lack a "\n"; a "\r" before the "\n" is part of the line's content, which
// is how git sees CRLF text when no conversion is configured.
func splitLines(data []byte) [][]byte {
	if len(data) == 0 {
		return nil
	}
	lines := make([][]byte, 0, bytes.Count(data, []byte{'\n'})+1)
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			lines = append(lines, data)
			break
		}
		lines = append(lines, data[:i+1:i+1])
		data = data[i+1:]
	}
	return lines
}

// hasNewline reports whether line ends with its "\n" terminator. Only the
// last line of a file can fail this.
func hasNewline(line []byte) bool {
	return len(line) > 0 && line[len(line)-1] == '\n'
}

// lineText is line without its "\n" terminator, as structured output shows
// it. A "\r" stays: it is content to a line diff.
func lineText(line []byte) string {
	if hasNewline(line) {
		line = line[:len(line)-1]
	}
	return string(line)
}

// lineTexts maps lineText over lines. It never returns nil, so that JSON
// shows no lines as [] rather than null.
func lineTexts(lines [][]byte) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = lineText(l)
	}
	return out
}
