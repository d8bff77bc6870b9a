package engine

import (
	"errors"
	"fmt"

	"github.com/tachyon-hpc/tachyon/progress"
	"github.com/tachyon-hpc/tachyon/rings"
)

// ringLink is a Link over the producer side of a cell ring: one packet
// per cell.
type ringLink struct {
	p    *rings.CellProducer
	max  int
	bell *progress.Doorbell // the peer's
}

func (l *ringLink) Reserve() []byte {
	if l.p.Claim(1) == 0 {
		return nil
	}
	return l.p.Slot(0)
}

func (l *ringLink) Commit(n int) {
	l.p.Commit(0, n)
	l.p.Publish(1)
}

func (l *ringLink) MaxPacket() int { return l.max }

func (l *ringLink) Check() error { return l.p.Check() }

func (l *ringLink) Wake() {
	if l.bell != nil {
		l.bell.RingFenced()
	}
}

// ringInbox is an Inbox over the consumer side of a cell ring.
type ringInbox struct {
	c *rings.CellConsumer
}

func (in *ringInbox) Peek(max int) (int, error) {
	n, err := in.c.Peek(max)
	if errors.Is(err, rings.ErrClosed) {
		err = nil
	}
	return n, err
}

func (in *ringInbox) Packet(i int) []byte { return in.c.Message(i) }
func (in *ringInbox) Release(k int)       { in.c.Release(k) }
func (in *ringInbox) Check() error        { return in.c.Check() }

// ringGeometry returns the cell count and size the control variables ask
// for, checked.
func ringGeometry() (cells, size int, err error) {
	cells, size = int(cellCount.Get()), int(cellSize.Get())
	if cells&(cells-1) != 0 || size&(size-1) != 0 {
		return 0, 0, fmt.Errorf("%w: engine_cells (%d) and engine_cell_size (%d) must be powers of two", ErrConfig, cells, size)
	}
	return cells, size, nil
}
