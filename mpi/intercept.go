package mpi

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/tachyon-hpc/tachyon/engine"
)

// Interception is the profiling interface (MPI's PMPI) in Go's idiom: a
// tool registers an Interceptor, and every routine of the Op list a
// program calls goes through it as a Call; the interceptor does what it
// wants before and after and calls next to go on, as gRPC's interceptors
// and net/http middleware do. Interceptors stack in the order they were
// added, the first outermost. The routines left out are the local
// queries, the group algebra and the constructors of values that reach
// MPI only through an intercepted routine (docs/tools.md lists them).
//
// The facade's own calls are not seen: a Sendrecv is one Call, not the
// Irecv, Send and Wait it is built on, and Finalize's barrier is not a
// Barrier. Without tools, each public routine pays one load and one
// predictable branch (the message path's, an entry: below), and nothing
// else.

// Op names an operation of the facade, as an interceptor sees it.
type Op uint8

// Operations an interceptor sees. The Layout forms of the sends and
// receives are operations of their own (OpSendLayout...).
const (
	OpInit     Op = iota + 1 // Init, InitThread
	OpFinalize               // Finalize, Comm.Finalize
	OpPcontrol               // Pcontrol
	OpSend
	OpSsend
	OpRsend
	OpBsend
	OpRecv
	OpIsend
	OpIssend
	OpIrsend
	OpIbsend
	OpIrecv
	OpSendrecv
	OpSendrecvReplace
	OpProbe
	OpIprobe
	OpSendLayout
	OpSsendLayout
	OpRsendLayout
	OpBsendLayout
	OpIsendLayout
	OpIssendLayout
	OpIrsendLayout
	OpIbsendLayout
	OpRecvLayout
	OpIrecvLayout
	OpSendInit
	OpSsendInit
	OpBsendInit
	OpRsendInit
	OpRecvInit
	OpStart
	OpStartall
	OpWait
	OpTest
	OpWaitall // Waitall, WaitallInto
	OpTestall
	OpWaitany
	OpTestany
	OpWaitsome
	OpTestsome
	OpCancel
	OpRequestFree
	OpBarrier
	OpDup
	OpSplit
	OpCreate
	OpCreateGroup // Peer is unused, Tag the tag
	OpCommFree
	OpMprobe
	OpImprobe
	OpMrecv  // Message.Recv
	OpImrecv // Message.Irecv
	OpRecvMessage
	OpTimerCreate  // Due the due time; Result.Request the timer
	OpResetTimer   // Request the timer, Due the new due time
	OpBufferAttach // Bytes the buffer's length
	OpBufferDetach // Result.Buffer the buffer
	OpPack         // Bytes the layout's size; Result.Count the bytes written
	OpUnpack       // Bytes the layout's size; Result.Count the bytes used
	OpAbort        // Code the exit status; the job ends whether or not next is called
	// The collectives (coll.go), blocking and nonblocking; Peer is the
	// root of a rooted one, Bytes what the rank sends (its buffer, for
	// Bcast). Barrier is OpBarrier, above.
	OpBcast
	OpReduce
	OpAllreduce
	OpGather
	OpGatherv
	OpScatter
	OpScatterv
	OpAllgather
	OpAllgatherv
	OpAlltoall
	OpAlltoallv
	OpReduceScatter
	OpReduceScatterBlock
	OpScan
	OpExscan
	OpIbarrier
	OpIbcast
	OpIreduce
	OpIallreduce
	OpIgather
	OpIgatherv
	OpIscatter
	OpIscatterv
	OpIallgather
	OpIallgatherv
	OpIalltoall
	OpIalltoallv
	OpIreduceScatter
	OpIreduceScatterBlock
	OpIscan
	OpIexscan
	OpBcastInit     // persistent
	OpAllreduceInit // persistent
	// Sessions and connections (session.go, connect.go, ports.go,
	// names.go, intercomm.go), which wait on other processes or change
	// what the process is connected to. Comm is nil but for Accept,
	// Connect, Disconnect and Merge; Rank is the session's world's.
	OpNewSession     // Result.Session the session
	OpSessionClose   // Session.Close: Session, Ctx its context
	OpCommFromGroup  // Session, Name the tag; Result.NewComm
	OpListen         // Session, Port the address; Result.Listener
	OpListenerAccept // Listener.Accept: Session, Listener, Ctx; Result.NewComm
	OpListenerClose  // Listener.Close: Session, Listener
	OpDial           // Session, Port the address, Ctx; Result.NewComm
	OpOpenPort       // Result.Port the port's name
	OpClosePort      // Port
	OpAccept         // Comm.Accept, AcceptContext: Port, Peer the root; Result.NewComm
	OpConnect        // Comm.Connect, ConnectContext: Port, Peer the root; Result.NewComm
	OpDisconnect     // Disconnect, DisconnectContext
	OpMerge          // High; Result.NewComm
	OpPublishName    // Name the service, Port
	OpLookupName     // Name the service; Result.Port
	OpUnpublishName  // Name the service, Port
	// Attributes, error handlers and error classes (attr.go,
	// errhandler.go, errors.go): local, but state a tool accounts for.
	OpNewKeyval      // Result.Keyval
	OpKeyvalFree     // Keyval.Free: Keyval
	OpSetAttr        // Keyval, Value
	OpDeleteAttr     // Keyval
	OpNewErrhandler  // Result.Errhandler
	OpSetErrhandler  // Errhandler
	OpCallErrhandler // Err the error
	OpAddErrorClass  // Result.Err the class
	OpAddErrorCode   // Err the class; Result.Err the code
	OpAddErrorString // Err the class or code, Name the text
	opEnd
)

var opCallNames = [...]string{"", "Init", "Finalize", "Pcontrol",
	"Send", "Ssend", "Rsend", "Bsend", "Recv", "Isend", "Issend", "Irsend", "Ibsend", "Irecv",
	"Sendrecv", "SendrecvReplace", "Probe", "Iprobe",
	"SendLayout", "SsendLayout", "RsendLayout", "BsendLayout",
	"IsendLayout", "IssendLayout", "IrsendLayout", "IbsendLayout", "RecvLayout", "IrecvLayout",
	"SendInit", "SsendInit", "BsendInit", "RsendInit", "RecvInit", "Start", "Startall",
	"Wait", "Test", "Waitall", "Testall", "Waitany", "Testany", "Waitsome", "Testsome",
	"Cancel", "RequestFree", "Barrier", "Dup", "Split", "Create", "CreateGroup", "CommFree",
	"Mprobe", "Improbe", "Mrecv", "Imrecv", "RecvMessage",
	"TimerCreate", "ResetTimer", "BufferAttach", "BufferDetach", "Pack", "Unpack", "Abort",
	"Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Scatter", "Scatterv",
	"Allgather", "Allgatherv", "Alltoall", "Alltoallv", "ReduceScatter", "ReduceScatterBlock", "Scan", "Exscan",
	"Ibarrier", "Ibcast", "Ireduce", "Iallreduce", "Igather", "Igatherv", "Iscatter", "Iscatterv",
	"Iallgather", "Iallgatherv", "Ialltoall", "Ialltoallv", "IreduceScatter", "IreduceScatterBlock", "Iscan", "Iexscan",
	"BcastInit", "AllreduceInit",
	"NewSession", "SessionClose", "CommFromGroup", "Listen", "ListenerAccept", "ListenerClose", "Dial",
	"OpenPort", "ClosePort", "Accept", "Connect", "Disconnect", "Merge",
	"PublishName", "LookupName", "UnpublishName",
	"NewKeyval", "KeyvalFree", "SetAttr", "DeleteAttr", "NewErrhandler", "SetErrhandler", "CallErrhandler",
	"AddErrorClass", "AddErrorCode", "AddErrorString"}

// String returns the name of the routine ("Send", "Waitall").
func (o Op) String() string {
	if o == 0 || o >= opEnd {
		return "Op(" + strconv.Itoa(int(o)) + ")"
	}
	return opCallNames[o]
}

// A Call is one operation as interceptors see it: the routine's
// arguments, and once the routine has run, its results. Fields that do
// not apply to an operation are zero, but for Peer, Tag, RecvPeer and
// RecvTag, which are then Undefined. A Call is valid until the operation
// returns; the facade then reuses it, so a tool keeps what it needs, not
// the *Call.
type Call struct {
	Op   Op    // the routine called; changing it changes nothing
	Rank int   // the caller's rank in its world; Undefined before Init
	Comm *Comm // the communicator: of a request for Wait, Test, Start, Cancel, RequestFree, of the message for Mrecv, Imrecv; nil for none

	Peer  int // the destination of a send, the source of a receive or probe (AnySource, ProcNull as given)
	Tag   int // the tag (AnyTag as given)
	Bytes int // bytes a send sends, or a receive's buffer holds (the layout's size for the Layout forms)

	RecvPeer int // Sendrecv's source
	RecvTag  int // Sendrecv's receive tag

	Request  *Request   // the request a Wait, Test, Start, Cancel or RequestFree is for
	Message  *Message   // the message an Mrecv or Imrecv receives (Peer and Tag are its source and tag)
	Requests []*Request // the requests of Startall, Waitall, Testall, Waitany, Testany, Waitsome, Testsome

	Level int     // Pcontrol's level; InitThread's required thread level
	Due   float64 // TimerCreate's and ResetTimer's due time, seconds from now
	Code  int     // Abort's exit status
	High  bool    // Merge's high

	Session    *Session    // the session of SessionClose, CommFromGroup, Listen, Dial, and of a Listener's
	Listener   *Listener   // the listener of ListenerAccept, ListenerClose
	Port       string      // the address or port name of Listen, Dial, ClosePort, Accept, Connect, PublishName, UnpublishName
	Name       string      // the service of PublishName, LookupName, UnpublishName; CommFromGroup's tag; AddErrorString's text
	Keyval     *Keyval     // the keyval of SetAttr, DeleteAttr, KeyvalFree
	Value      any         // SetAttr's value
	Errhandler *Errhandler // SetErrhandler's handler
	Err        error       // CallErrhandler's error, AddErrorCode's class, AddErrorString's class or code

	// Ctx is the context of a Context form (RecvContext, WaitContext,
	// BarrierContext...), which is its plain form's operation with Ctx
	// set; nil for the plain form. An interceptor may replace it (or set
	// one on a plain call): the routine is bounded by the Ctx next sees.
	Ctx context.Context

	Result Result // what the routine returned besides its error, once next has returned

	// The routine and its other arguments, for the call made when the
	// last interceptor calls next: op is Op as the routine set it.
	op        Op
	buf, buf2 []byte
	layout    Layout   // of the Layout forms, Pack and Unpack
	statuses  []Status // WaitallInto's; into is true when the caller gave them
	into      bool
	received  Received // RecvMessage's message, whose status is Result.Status

	// Buffers a pooled Call keeps: the copies of a routine's requests and
	// statuses that Requests and statuses are, so that the caller's
	// slices are never kept and need not escape to the heap (a window of
	// requests in a local array stays there).
	reqBuf []*Request
	stBuf  []Status
	home   *proc // the rank whose stack the Call goes back to; nil: the pool
	group  *Group
	color  int
	key    int
	coll   collArgs // a collective's arguments
	args   any      // NewSession's []SessionOption, NewKeyval's keyvalArgs, NewErrhandler's function: rare, so boxed, keeping the Call small
}

// keyvalArgs are NewKeyval's arguments.
type keyvalArgs struct {
	copy  AttrCopier
	del   AttrDeleter
	extra any
}

// Result is what an operation returned besides its error, as
// interceptors see and may change it.
type Result struct {
	Status   Status      // of a receive, probe, Sendrecv, Wait, Test, Waitany, Testany, RecvMessage
	Flag     bool        // Iprobe found a message; Test, Testall, Testany completed
	Index    int         // Waitany, Testany: the request that completed (Undefined if none)
	Indices  []int       // Waitsome, Testsome: the requests that completed
	Statuses []Status    // Waitall, Testall, Waitsome, Testsome: the statuses
	Request  *Request    // started by a nonblocking send or receive, or made by a persistent Init
	Message  *Message    // taken by Mprobe, Improbe
	NewComm  *Comm       // made by Dup, Split, Create, CreateGroup, CommFromGroup, ListenerAccept, Dial, Accept, Connect, Merge
	Provided ThreadLevel // InitThread's
	Buffer   []byte      // BufferDetach's: the buffer detached
	Count    int         // Pack's bytes written, Unpack's bytes used

	Session    *Session    // made by NewSession
	Listener   *Listener   // made by Listen
	Port       string      // OpenPort's port name, LookupName's port
	Keyval     *Keyval     // made by NewKeyval
	Errhandler *Errhandler // made by NewErrhandler
	Err        error       // made by AddErrorClass, AddErrorCode
}

// A Handler carries out a Call, filling in its Result: the next
// interceptor, or at the end of the chain the routine itself. It returns
// the routine's error.
type Handler func(c *Call) error

// An Interceptor wraps every operation of the facade. It may time, count
// or log the call, change the Call's Comm, Peer or Tag before passing it
// on, return without calling next (the operation then does not happen and
// its caller gets the error returned and the Result as left), or change
// the Result and the error. It must call next, if at all, before it
// returns, from the goroutine it was called on; it may call other
// routines of the facade, which its own and later interceptors then see.
type Interceptor func(c *Call, next Handler) error

// tools is the chain every intercepted operation enters, nil while no
// interceptor is registered: the one load each public routine makes.
// Intercept changes it only while no routine can run (toolsIdle), so
// routines read it, and the entries below, with plain loads.
var tools *toolChain

// toolChain is the stacked interceptors. The outermost is called
// directly, with the rest of the chain as its next.
type toolChain struct {
	first Interceptor
	next  Handler
}

var toolsMu sync.Mutex // serializes changes to registered
var registered []*Interceptor

// Intercept adds i to the interceptors every operation of the facade goes
// through, inside those added before it, and returns a function that
// removes it. As a PMPI tool is linked into a program before it runs, an
// interceptor is added before MPI starts (Init, Run, Main) and removed
// after it ends: both return ErrOther while MPI is initialized in this
// process or a world of Run runs, and remove does nothing the second
// time. A tool that wants to pause uses Pcontrol. i must not be nil.
func Intercept(i Interceptor) (remove func() error, err error) {
	if i == nil {
		return nil, errorf(ErrArg, "Intercept", "nil Interceptor")
	}
	p := &i
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if err := toolsIdle("Intercept"); err != nil {
		return nil, err
	}
	registered = append(registered, p)
	rebuildTools()
	return func() error {
		toolsMu.Lock()
		defer toolsMu.Unlock()
		k := slices.Index(registered, p)
		if k < 0 {
			return nil
		}
		if err := toolsIdle("Intercept's remove"); err != nil {
			return err
		}
		registered = slices.Delete(registered, k, k+1)
		rebuildTools()
		return nil
	}, nil
}

// toolsIdle returns nil if no routine of the facade can be running: MPI
// is not initialized in this process and no world of Run runs.
func toolsIdle(op string) error {
	if env.state.Load() == stateInit || runWorlds.Load() > 0 {
		return errorf(ErrOther, op, "MPI is running in this process: interceptors are added before Init, Run or Main and removed after")
	}
	return nil
}

// rebuildTools builds the chain of the registered interceptors and points
// the entries at the routines' forms with or without it, under toolsMu.
func rebuildTools() {
	if len(registered) == 0 {
		tools = nil
		setEntries(false)
		return
	}
	h := Handler(invoke)
	for k := len(registered) - 1; k >= 1; k-- {
		i, next := *registered[k], h
		h = func(c *Call) error { return i(c, next) }
	}
	tools = &toolChain{first: *registered[0], next: h}
	setEntries(true)
}

// The entries of the routines on the message path (Send, Recv, Isend,
// Irecv, Wait, and the Context forms of Send, Recv and Wait): each
// routine is one call through its entry, the routine itself (pSend...)
// or, while interceptors are registered, it through them
// (sendTooled...). The call is small enough for the compiler to put
// in line in the routine's caller, so that without tools a program calls
// the routine's own code as directly as if there were no interception:
// the entry costs one load and an indirect call whose target does not
// change.
var (
	sendEntry  = (*Comm).pSend
	recvEntry  = (*Comm).pRecv
	isendEntry = (*Comm).pIsend
	irecvEntry = (*Comm).pIrecv
	waitEntry  = (*Request).pWait

	sendContextEntry = (*Comm).pSendContext
	recvContextEntry = (*Comm).pRecvContext
	waitContextEntry = (*Request).pWaitContext
)

// setEntries points the entries at the routines' forms through the
// interceptors, or at the routines themselves.
func setEntries(tooled bool) {
	if tooled {
		sendEntry, recvEntry, isendEntry = (*Comm).sendTooled, (*Comm).recvTooled, (*Comm).isendTooled
		irecvEntry, waitEntry = (*Comm).irecvTooled, (*Request).waitTooled
		sendContextEntry, recvContextEntry = (*Comm).sendContextTooled, (*Comm).recvContextTooled
		waitContextEntry = (*Request).waitContextTooled
		return
	}
	sendEntry, recvEntry, isendEntry = (*Comm).pSend, (*Comm).pRecv, (*Comm).pIsend
	irecvEntry, waitEntry = (*Comm).pIrecv, (*Request).pWait
	sendContextEntry, recvContextEntry = (*Comm).pSendContext, (*Comm).pRecvContext
	waitContextEntry = (*Request).pWaitContext
}

// intercepted reports whether any interceptor is registered.
func intercepted() bool { return tools != nil }

// intercept passes c through the registered interceptors and returns the
// routine's error. The caller releases c after reading its Result.
func intercept(c *Call) error {
	if t := tools; t != nil {
		return t.first(c, t.next)
	}
	return invoke(c)
}

// callPool recycles the Calls of ranks at ThreadMultiple and of
// operations of no rank: an intercepted operation allocates none.
var callPool = sync.Pool{New: func() any { return new(Call) }}

// getCall returns a clean Call for an operation of rank p (nil for none):
// from p's own stack below ThreadMultiple, else from the pool.
func getCall(p *proc) *Call {
	if p != nil && p.thread < ThreadMultiple {
		if p.nCalls > 0 {
			p.nCalls--
			c := p.calls[p.nCalls]
			p.calls[p.nCalls] = nil
			return c
		}
		c := new(Call)
		c.home = p
		return c
	}
	return callPool.Get().(*Call)
}

// release returns c for reuse, cleared so that it keeps nothing alive:
// to the stack of the rank it came from, or to the pool.
func (c *Call) release() {
	rb, sb, home := c.reqBuf, c.stBuf, c.home
	clear(rb)
	if cap(rb) > maxKeptRequests {
		rb, sb = nil, nil
	}
	*c = Call{}
	c.reqBuf, c.stBuf, c.home = rb[:0], sb[:0], home
	if home != nil {
		if home.nCalls < len(home.calls) {
			home.calls[home.nCalls] = c
			home.nCalls++
		}
		return
	}
	callPool.Put(c)
}

// maxKeptRequests bounds the buffers a pooled Call keeps.
const maxKeptRequests = 1 << 12

// Pcontrol passes level to the profiling tools (MPI_PCONTROL), and is
// otherwise a no-op. MPI asks tools to read level 0 as "profiling off",
// 1 as "on at the normal level of detail" (a tool's state from Init) and
// 2 as "flush what is buffered"; other levels mean what a tool says.
func Pcontrol(level int) error {
	if !intercepted() {
		return nil
	}
	c := newCall(OpPcontrol, nil)
	c.Level = level
	return c.run()
}

// newCall returns a Call of op on comm, with no peer or tag, to release
// after use.
func newCall(op Op, comm *Comm) *Call {
	var p *proc
	if comm != nil {
		p = comm.p
	}
	c := getCall(p)
	c.Op, c.op, c.Rank, c.Comm = op, op, Undefined, comm
	c.Peer, c.Tag, c.RecvPeer, c.RecvTag = Undefined, Undefined, Undefined, Undefined
	if p != nil {
		c.Rank = p.ep.Rank()
	}
	return c
}

// peerCall returns the Call of op on comm to or from peer with tag and
// buf.
func peerCall(op Op, comm *Comm, buf []byte, peer, tag int) *Call {
	c := newCall(op, comm)
	c.Peer, c.Tag, c.Bytes, c.buf = peer, tag, len(buf), buf
	return c
}

// layoutCall is peerCall for the Layout forms.
func layoutCall(op Op, comm *Comm, buf []byte, l Layout, peer, tag int) *Call {
	c := peerCall(op, comm, buf, peer, tag)
	c.Bytes, c.layout = l.Size(), l
	return c
}

// requestCall returns the Call of op on request r.
func requestCall(op Op, r *Request) *Call {
	var comm *Comm
	if r != nil {
		comm = r.c
	}
	c := newCall(op, comm)
	c.Request = r
	return c
}

// requestsCall returns the Call of op on reqs, with the rank of the first
// request that has one. Its Requests are a copy of reqs, which runOn
// copies back.
func requestsCall(op Op, reqs []*Request) *Call {
	c := newCall(op, nil)
	c.reqBuf = append(c.reqBuf[:0], reqs...)
	c.Requests = c.reqBuf
	for _, r := range reqs {
		if r != nil && r.c != nil && r.c.p != nil {
			c.Rank = r.c.p.ep.Rank()
			break
		}
	}
	return c
}

// run passes c through the interceptors and releases it, for a routine
// whose only result is its error.
func (c *Call) run() error {
	err := intercept(c)
	c.release()
	return err
}

// runStatus is run for a routine whose result is a status.
func (c *Call) runStatus() (Status, error) {
	err := intercept(c)
	st := c.Result.Status
	c.release()
	return st, err
}

// runRequest is run for a routine whose result is a request.
func (c *Call) runRequest() (*Request, error) {
	err := intercept(c)
	r := c.Result.Request
	c.release()
	return r, err
}

// runResult is run for a routine with several results.
func (c *Call) runResult() (Result, error) {
	err := intercept(c)
	r := c.Result
	c.release()
	return r, err
}

// runOn is runResult for a routine of the requests reqs (and statuses,
// WaitallInto's, or nil) that c holds copies of: what the routine and the
// interceptors left in the copies (entries set to nil as they completed,
// statuses) is copied back.
func (c *Call) runOn(reqs []*Request, statuses []Status) (Result, error) {
	err := intercept(c)
	copy(reqs, c.Requests)
	copy(statuses, c.statuses)
	r := c.Result
	c.release()
	return r, err
}

// runComm is run for a routine whose result is a communicator.
func (c *Call) runComm() (*Comm, error) {
	err := intercept(c)
	nc := c.Result.NewComm
	c.release()
	return nc, err
}

// invoke carries out c with the routine's own implementation: the end of
// every chain.
func invoke(c *Call) (err error) {
	if c.Ctx != nil {
		if ok, err := invokeContext(c); ok {
			return err
		}
	}
	r := &c.Result
	m := c.Comm
	switch c.op {
	case OpInit:
		r.Provided, err = pInitThread(ThreadLevel(c.Level))
	case OpFinalize:
		err = pFinalize(m)
	case OpPcontrol:
	case OpSend:
		err = m.pSend(c.buf, c.Peer, c.Tag)
	case OpSsend, OpRsend, OpBsend:
		err = m.pSendMode(c.op, c.buf, c.Peer, c.Tag)
	case OpRecv:
		r.Status, err = m.pRecv(c.buf, c.Peer, c.Tag)
	case OpIsend:
		r.Request, err = m.pIsend(c.buf, c.Peer, c.Tag)
	case OpIssend, OpIrsend, OpIbsend:
		r.Request, err = m.pIsendMode(c.op, c.buf, c.Peer, c.Tag)
	case OpIrecv:
		r.Request, err = m.pIrecv(c.buf, c.Peer, c.Tag)
	case OpSendrecv:
		r.Status, err = m.pSendrecv(c.buf, c.Peer, c.Tag, c.buf2, c.RecvPeer, c.RecvTag)
	case OpSendrecvReplace:
		r.Status, err = m.pSendrecvReplace(c.buf, c.Peer, c.Tag, c.RecvPeer, c.RecvTag)
	case OpProbe:
		r.Status, err = m.pProbe(c.Peer, c.Tag)
	case OpIprobe:
		r.Status, r.Flag, err = m.pIprobe(c.Peer, c.Tag)
	case OpMprobe:
		r.Message, r.Status, err = m.pMprobe(c.Peer, c.Tag)
	case OpImprobe:
		r.Message, r.Status, r.Flag, err = m.pImprobe(c.Peer, c.Tag)
	case OpMrecv:
		r.Status, err = c.Message.pRecv(c.buf)
	case OpImrecv:
		r.Request, err = c.Message.pIrecv(c.buf)
	case OpRecvMessage:
		ctx := c.Ctx
		if ctx == nil { // an interceptor took it away
			ctx = context.Background()
		}
		c.received, err = m.pRecvMessage(ctx, c.Peer, c.Tag)
		r.Status = c.received.Status
	case OpTimerCreate:
		r.Request, err = pTimerCreate(c.Due)
	case OpResetTimer:
		err = c.Request.pResetTimer(c.Due)
	case OpBufferAttach:
		err = m.pBufferAttach(c.buf)
	case OpBufferDetach:
		r.Buffer, err = m.pBufferDetach()
	case OpPack:
		r.Count, err = c.layout.pack(c.buf2, c.buf)
	case OpUnpack:
		r.Count, err = c.layout.unpack(c.buf, c.buf2)
	case OpAbort:
		pAbort(m, c.Code)
	case OpSendLayout, OpSsendLayout, OpRsendLayout, OpBsendLayout:
		err = m.pSendLayoutMode(c.op, c.buf, c.layout, c.Peer, c.Tag)
	case OpIsendLayout, OpIssendLayout, OpIrsendLayout, OpIbsendLayout:
		r.Request, err = m.pIsendLayoutMode(c.op, c.buf, c.layout, c.Peer, c.Tag)
	case OpRecvLayout:
		r.Status, err = m.pRecvLayout(c.buf, c.layout, c.Peer, c.Tag)
	case OpIrecvLayout:
		r.Request, err = m.pIrecvLayout(c.buf, c.layout, c.Peer, c.Tag)
	case OpSendInit, OpSsendInit, OpBsendInit, OpRsendInit, OpRecvInit:
		r.Request, err = m.pInitMode(c.op, c.buf, c.Peer, c.Tag)
	case OpStart:
		err = c.Request.pStart()
	case OpStartall:
		err = pStartall(c.Requests)
	case OpWait:
		r.Status, err = c.Request.pWait()
	case OpTest:
		r.Status, r.Flag, err = c.Request.pTest()
	case OpWaitall:
		if c.into {
			r.Statuses, err = c.statuses, pWaitallInto(c.Requests, c.statuses)
		} else {
			r.Statuses, err = pWaitall(c.Requests)
		}
	case OpTestall:
		r.Statuses, r.Flag, err = pTestall(c.Requests)
	case OpWaitany:
		r.Index, r.Status, err = pWaitany(c.Requests)
	case OpTestany:
		r.Index, r.Status, r.Flag, err = pTestany(c.Requests)
	case OpWaitsome:
		r.Indices, r.Statuses, err = pWaitsome(c.Requests)
	case OpTestsome:
		r.Indices, r.Statuses, err = pTestsome(c.Requests)
	case OpCancel:
		err = c.Request.pCancel()
	case OpRequestFree:
		err = c.Request.pFree()
	case OpBarrier:
		err = m.pBarrier()
	case OpDup:
		r.NewComm, err = m.pDup()
	case OpSplit:
		r.NewComm, err = m.pSplit(c.color, c.key)
	case OpCreate:
		r.NewComm, err = m.pCreate(c.group)
	case OpCreateGroup:
		r.NewComm, err = m.pCreateGroup(c.group, c.Tag)
	case OpCommFree:
		err = m.pFree()
	default:
		if c.op >= OpBcast && c.op <= OpAllreduceInit {
			return invokeColl(c)
		}
		if c.op >= OpNewSession && c.op < opEnd {
			return invokeProcess(c)
		}
		err = errorf(ErrArg, c.Op.String(), "a Call that was not made by the facade")
	}
	return err
}

// invokeContext is invoke for a Call with a context: the Context form of
// its routine. It reports false for a routine that has none (one that
// does not block, or a communicator constructor, Finalize), which then
// runs as if Ctx were nil.
func invokeContext(c *Call) (ok bool, err error) {
	r := &c.Result
	m := c.Comm
	switch c.op {
	case OpSend, OpSsend, OpRsend:
		err = m.pSendContextMode(c.Ctx, c.op, c.buf, c.Peer, c.Tag)
	case OpRecv:
		r.Status, err = m.pRecvContext(c.Ctx, c.buf, c.Peer, c.Tag)
	case OpSendrecv:
		r.Status, err = m.pSendrecvContext(c.Ctx, c.buf, c.Peer, c.Tag, c.buf2, c.RecvPeer, c.RecvTag)
	case OpProbe:
		r.Status, err = m.pProbeContext(c.Ctx, c.Peer, c.Tag)
	case OpMprobe:
		r.Message, r.Status, err = m.mprobeEngine("MprobeContext", c.Ctx, c.Peer, c.Tag)
	case OpSendLayout, OpSsendLayout, OpRsendLayout:
		err = m.pSendLayoutContextMode(c.Ctx, c.op, c.buf, c.layout, c.Peer, c.Tag)
	case OpRecvLayout:
		r.Status, err = m.pRecvLayoutContext(c.Ctx, c.buf, c.layout, c.Peer, c.Tag)
	case OpWait:
		r.Status, err = c.Request.pWaitContext(c.Ctx)
	case OpWaitall:
		if !c.into {
			r.Statuses, err = pWaitallContext(c.Ctx, c.Requests)
		} else if err = waitDoneContext(c.Ctx, "WaitallInto", c.Requests); err == nil {
			r.Statuses, err = c.statuses, pWaitallInto(c.Requests, c.statuses)
		}
	case OpWaitany:
		r.Index, r.Status, err = pWaitanyContext(c.Ctx, c.Requests)
	case OpWaitsome:
		r.Indices, r.Statuses, err = pWaitsomeContext(c.Ctx, c.Requests)
	case OpBarrier:
		err = m.pBarrierContext(c.Ctx)
	case OpBufferDetach:
		r.Buffer, err = m.pBufferDetachContext(c.Ctx)
	default:
		if c.op >= OpBcast && c.op <= OpExscan {
			return true, m.pCollectiveContext(c.Ctx, &c.coll)
		}
		return false, nil
	}
	return true, err
}

// sendMode returns the engine's mode of the send op.
func sendMode(op Op) engine.Mode {
	switch op {
	case OpSsend, OpIssend, OpSsendLayout, OpIssendLayout, OpSsendInit:
		return engine.Synchronous
	case OpRsend, OpIrsend, OpRsendLayout, OpIrsendLayout, OpRsendInit:
		return engine.Ready
	case OpBsend, OpIbsend, OpBsendLayout, OpIbsendLayout, OpBsendInit:
		return engine.Buffered
	}
	return engine.Standard
}

// requestOp returns what a request started by op records as its routine.
func requestOp(op Op) opcode {
	switch op {
	case OpIssend, OpIssendLayout:
		return opIssend
	case OpIrsend, OpIrsendLayout:
		return opIrsend
	case OpIbsend, OpIbsendLayout:
		return opIbsend
	case OpIrecv, OpIrecvLayout:
		return opIrecv
	case OpSendInit:
		return opSendInit
	case OpSsendInit:
		return opSsendInit
	case OpBsendInit:
		return opBsendInit
	case OpRsendInit:
		return opRsendInit
	case OpRecvInit:
		return opRecvInit
	}
	return opIsend
}

// processCall returns the Call of op, a routine of the process rather
// than of a communicator, with the rank of the process's MPI if it is
// initialized.
func processCall(op Op) *Call {
	c := newCall(op, nil)
	if p := current(); p != nil {
		c.Rank = p.ep.Rank()
	}
	return c
}

// sessionCall returns the Call of op on session s, with the rank of s's
// world.
func sessionCall(op Op, s *Session) *Call {
	c := newCall(op, nil)
	c.Session = s
	if s != nil && s.world != nil {
		c.Rank = s.world.ep.Rank()
	}
	return c
}

// listenerCall returns the Call of op on listener l, of l's session.
func listenerCall(op Op, l *Listener) *Call {
	var s *Session
	if l != nil {
		s = l.s
	}
	c := sessionCall(op, s)
	c.Listener = l
	return c
}

// invokeProcess is invoke for the routines of sessions, connections,
// attributes and error handlers. A routine whose only form takes a
// context runs with context.Background() if an interceptor took Ctx
// away; Disconnect without Ctx is the plain form, bounded by
// mpi_disconnect_timeout.
func invokeProcess(c *Call) (err error) {
	r := &c.Result
	m := c.Comm
	ctx := c.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	switch c.op {
	case OpNewSession:
		opts, _ := c.args.([]SessionOption)
		r.Session, err = pNewSession(opts)
	case OpSessionClose:
		err = c.Session.pClose(ctx)
	case OpCommFromGroup:
		r.NewComm, err = c.Session.pCommFromGroup(c.group, c.Name)
	case OpListen:
		r.Listener, err = c.Session.pListen(c.Port)
	case OpListenerAccept:
		r.NewComm, err = c.Listener.pAccept(ctx)
	case OpListenerClose:
		err = c.Listener.pClose()
	case OpDial:
		r.NewComm, err = c.Session.pDial(ctx, c.Port)
	case OpOpenPort:
		r.Port, err = pOpenPort()
	case OpClosePort:
		err = pClosePort(c.Port)
	case OpAccept:
		r.NewComm, err = m.pAcceptContext(ctx, c.Port, c.Peer)
	case OpConnect:
		r.NewComm, err = m.pConnectContext(ctx, c.Port, c.Peer)
	case OpDisconnect:
		if c.Ctx == nil {
			err = m.pDisconnect()
		} else {
			err = m.pDisconnectContext(c.Ctx)
		}
	case OpMerge:
		r.NewComm, err = m.pMerge(c.High)
	case OpPublishName:
		err = pPublishName(c.Name, c.Port)
	case OpLookupName:
		r.Port, err = pLookupName(c.Name)
	case OpUnpublishName:
		err = pUnpublishName(c.Name, c.Port)
	case OpNewKeyval:
		a, _ := c.args.(keyvalArgs)
		r.Keyval = pNewKeyval(a.copy, a.del, a.extra)
	case OpKeyvalFree:
		err = c.Keyval.pFree()
	case OpSetAttr:
		err = m.pSetAttr(c.Keyval, c.Value)
	case OpDeleteAttr:
		err = m.pDeleteAttr(c.Keyval)
	case OpNewErrhandler:
		fn, _ := c.args.(func(*Comm, error))
		r.Errhandler, err = pNewErrhandler(fn)
	case OpSetErrhandler:
		err = m.pSetErrhandler(c.Errhandler)
	case OpCallErrhandler:
		err = m.pCallErrhandler(c.Err)
	case OpAddErrorClass:
		r.Err, err = pAddErrorClass()
	case OpAddErrorCode:
		r.Err, err = pAddErrorCode(c.Err)
	case OpAddErrorString:
		err = pAddErrorString(c.Err, c.Name)
	default:
		err = errorf(ErrArg, c.Op.String(), "a Call that was not made by the facade")
	}
	return err
}
