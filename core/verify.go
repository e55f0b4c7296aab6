package core

import "fmt"

// Verify checks the store. See verify docs.
func (s *Store) Verify(deep bool, progress func(done, total int)) (*VerifyReport, error) {
	return nil, fmt.Errorf("%w: verify", errNotImplemented)
}
