package nic

// Audit checks a link's frame ownership record against its rings.
func Audit(l Link) error {
	switch l := l.(type) {
	case *xskLink:
		return l.audit()
	case *udpLink:
		return l.audit()
	case *faulty:
		return Audit(l.Link)
	}
	return nil
}
