package mpit

import (
	"slices"
	"strconv"
	"strings"
)

// Categories group the variables (MPI-3.1's section 14.3.8). A control
// variable is in the category cvar files it under (cvar.WithCategory), a
// performance variable in the one its name starts with (pvar's category,
// "engine" for "engine_rendezvous"); a variable without a category is in
// none. Categories form a tree by their names: "a.b" is in "a", which
// exists as soon as "a.b" does. Like variables, categories are only ever
// added, and a category's lists only grow, in the order their members were
// added; CategoryChanged's stamp grows whenever anything is added.

// CategoryDesc describes a category (MPI_T_CATEGORY_GET_INFO).
type CategoryDesc struct {
	Name          string // unique among categories
	Desc          string // what its variables are about; "" for a category Tachyon does not describe
	NumCvars      int    // control variables in it
	NumPvars      int    // performance variables in it
	NumCategories int    // categories in it
}

// category is a category of the interface's table.
type category struct {
	name, desc         string
	cvars, pvars, cats []int
}

// categoryDocs describes the categories of Tachyon's packages.
var categoryDocs = map[string]string{
	"clock":    "The clock behind Wtime: its source, calibration and steering.",
	"engine":   "The message engine: matching, protocols, queues and the network device.",
	"mpi":      "The MPI facade.",
	"nic":      "Network interfaces: AF_XDP sockets, XDP programs and their rings.",
	"progress": "The progress engine: polling, spinning and the timer wheel.",
	"rings":    "The shared-memory rings between processes of a node.",
}

// categoryOf returns the category named name, adding it and the
// categories above it if they are new, or nil for "". The caller holds
// tables' lock.
func categoryOf(name string) *category {
	if name == "" {
		return nil
	}
	if i, ok := tables.catByName[name]; ok {
		return tables.cats[i]
	}
	var parent *category
	if j := strings.LastIndexByte(name, '.'); j >= 0 {
		parent = categoryOf(name[:j])
	}
	i := len(tables.cats)
	c := &category{name: name, desc: categoryDocs[name]}
	tables.catByName[name] = i
	tables.cats = append(tables.cats, c)
	if parent != nil {
		parent.cats = append(parent.cats, i)
	}
	return c
}

// categoryAt returns, up to date, the category of index i, or
// ErrInvalidIndex; the caller holds tables' lock.
func categoryAt(op string, i int) (*category, error) {
	refresh() // its lists take in what was registered since the last look
	return entryAt(op, "category", &tables.cats, i)
}

// CategoryNum returns the number of categories (MPI_T_CATEGORY_GET_NUM).
// It never decreases; the categories are indexed 0 to CategoryNum()-1.
func CategoryNum() (int, error) { return tableLen("CategoryNum", &tables.cats) }

// CategoryInfo describes the category of index i (MPI_T_CATEGORY_GET_INFO).
// It returns ErrInvalidIndex for an index outside [0, CategoryNum()).
func CategoryInfo(i int) (CategoryDesc, error) {
	tables.Lock()
	defer tables.Unlock()
	c, err := categoryAt("CategoryInfo", i)
	if err != nil {
		return CategoryDesc{}, err
	}
	return CategoryDesc{c.name, c.desc, len(c.cvars), len(c.pvars), len(c.cats)}, nil
}

// CategoryIndex returns the index of the category named name
// (MPI_T_CATEGORY_GET_INDEX), or ErrInvalidName if there is none.
func CategoryIndex(name string) (int, error) {
	if _, err := current("CategoryIndex"); err != nil {
		return 0, err
	}
	tables.Lock()
	defer tables.Unlock()
	refresh()
	i, ok := tables.catByName[name]
	if !ok {
		return 0, errorf(ErrInvalidName, "no category "+strconv.Quote(name))
	}
	return i, nil
}

// CategoryCvars returns the indexes of the control variables in the
// category of index i (MPI_T_CATEGORY_GET_CVARS), in the order they were
// added; a later call returns the same list or a longer one that starts
// with it. It returns ErrInvalidIndex for an index outside
// [0, CategoryNum()).
func CategoryCvars(i int) ([]int, error) {
	return categoryList("CategoryCvars", i, func(c *category) []int { return c.cvars })
}

// CategoryPvars returns the indexes of the performance variables in the
// category of index i (MPI_T_CATEGORY_GET_PVARS), as CategoryCvars does.
func CategoryPvars(i int) ([]int, error) {
	return categoryList("CategoryPvars", i, func(c *category) []int { return c.pvars })
}

// CategoryCategories returns the indexes of the categories in the category
// of index i (MPI_T_CATEGORY_GET_CATEGORIES), as CategoryCvars does. No
// category is in itself, directly or through others.
func CategoryCategories(i int) ([]int, error) {
	return categoryList("CategoryCategories", i, func(c *category) []int { return c.cats })
}

// categoryList returns a copy of the list of category i that list picks.
func categoryList(op string, i int, list func(*category) []int) ([]int, error) {
	tables.Lock()
	defer tables.Unlock()
	c, err := categoryAt(op, i)
	if err != nil {
		return nil, err
	}
	return slices.Clone(list(c)), nil
}

// CategoryChanged returns a stamp of the category information
// (MPI_T_CATEGORY_CHANGED): two calls that return the same stamp saw the
// same categories with the same members; a later stamp is larger if a
// variable or category was added in between. It says nothing else.
func CategoryChanged() (int, error) {
	if _, err := current("CategoryChanged"); err != nil {
		return 0, err
	}
	tables.Lock()
	defer tables.Unlock()
	refresh()
	return tables.stamp, nil
}
