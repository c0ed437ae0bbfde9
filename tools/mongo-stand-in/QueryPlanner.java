// Which index answers a query (issue 17): mongo-java-server asks its indexes in creation order and
// takes the first whose canHandle accepts the query, and its unique indexes accept only a query on
// exactly their keys. Here every index is considered: a unique index whose keys all have a plain
// value in the query (the query may have more fields: {_id, organization_id} uses the _id index),
// then the secondary index that bounds the most keys (SecondaryIndex.boundsFor) or the compound
// unique index with the longest prefix (TupleUniqueIndex.prefixes: equality, then maybe $in). A
// $or is read branch by branch, each with the query's other conditions, when an index narrows every
// branch more than the other conditions alone (a customer by id or external_id:
// {organization_id, deleted_at: null, $or: [{_id}, {external_id}]} reads the _id index and the
// (organization_id, external_id, deleted_at) one, not all of the organization's customers). The
// candidates are read in the collection's natural order, so that a query answers the same documents
// in the same order with or without indexes; the collection then filters them with the whole query.

import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.ValueComparator;
import de.bwaldvogel.mongo.bson.Document;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;

final class QueryPlanner {

    private QueryPlanner() {
    }

    /** Indexes can be turned off (STAND_IN_INDEXES=off) to compare answers with and without them. */
    static final boolean ENABLED = !"off".equals(System.getenv("STAND_IN_INDEXES"));

    /** The candidate positions of a query in natural order, or null when no index helps (scan). */
    static <P> List<P> candidates(List<Index<P>> indexes, Document query, Comparator<P> naturalOrder) {
        if (!ENABLED || query == null || query.isEmpty()) {
            return null;
        }
        Plan<P> plan = plan(indexes, query, 0);
        if (plan == null) {
            return null;
        }
        // A document can match several branches of a $or: each is kept once.
        Set<P> found = new HashSet<>();
        plan.collect(found);
        List<P> positions = new ArrayList<>(found);
        positions.sort(naturalOrder);
        return positions;
    }

    /**
     * Branches of a $or planned one by one at most, and how deep a $or in a branch is planned too
     * (at most 100 x 100 branch plans): a longer $or, or one nested deeper, is read as a whole.
     */
    private static final int MAX_OR_BRANCHES = 100;
    private static final int MAX_OR_DEPTH = 2;

    /**
     * How an index reads a query's candidates: an index with what it is given (the projected query of
     * a unique index, the query of a secondary index, or a compound unique index's prefixes), or a
     * $or's branches, each read by a plan of its own. `score`: how much the read is narrowed (for a
     * $or, its least narrowed branch's). `narrowing`: how many of the keys it bounds have a value
     * other than null ({deleted_at: null} bounds a key, but most documents share it).
     */
    private record Plan<P>(Index<P> index, Document query, TupleUniqueIndex.Prefixes prefixes, List<Plan<P>> branches, int score,
                           int narrowing) {

        @SuppressWarnings("unchecked")
        void collect(Set<P> into) {
            if (branches != null) {
                branches.forEach(branch -> branch.collect(into));
                return;
            }
            Iterable<P> found = prefixes != null ? (Iterable<P>) ((TupleUniqueIndex) index).positionsWithPrefixes(prefixes) : index.getPositions(query);
            for (P position : found) {
                if (position != null) {
                    into.add(position);
                }
            }
        }

        /** The key a plan bounds when it bounds only one by a value other than null (its index's first), else null. */
        String onlyKey() {
            return branches == null && narrowing <= 1 ? index.getKeys().get(0).getKey() : null;
        }
    }

    /**
     * The best plan for a query: the index that narrows it most, or, when the query has a $or whose
     * every branch (with the query's other conditions) an index narrows more, the union of the
     * branches' plans, as MongoDB reads a $or with an index per clause. Null when no index helps.
     */
    private static <P> Plan<P> plan(List<Index<P>> indexes, Document query, int depth) {
        Plan<P> best = null;
        for (Index<P> index : indexes) {
            if (index instanceof SecondaryIndex) {
                SecondaryIndex.Bounds bounds = ((SecondaryIndex<P>) index).boundsFor(query);
                if (bounds != null && (best == null || bounds.score() > best.score())) {
                    best = new Plan<>(index, query, null, null, bounds.score(), bounds.narrowing());
                }
            } else if (index.isUnique()) {
                Document projected = projectOnKeys(index, query);
                // A unique index on equality of all its keys: at most one candidate (or one per $in value).
                int score = 1000 + index.getKeys().size();
                if (projected != null && (best == null || score > best.score()) && index.canHandle(projected)) {
                    best = new Plan<>(index, projected, null, null, score, Integer.MAX_VALUE); // a point read
                }
                // Equality (then maybe a $in) on its first keys only: ranges of it, scored as a secondary index's prefix.
                TupleUniqueIndex.Prefixes prefixes = index instanceof TupleUniqueIndex ? ((TupleUniqueIndex) index).prefixes(query) : null;
                if (prefixes != null && (best == null || prefixes.score() > best.score())) {
                    best = new Plan<>(index, null, prefixes, null, prefixes.score(), prefixes.narrowing());
                }
            }
        }
        Plan<P> union = depth < MAX_OR_DEPTH ? orPlan(indexes, query, depth) : null;
        return union != null && (best == null || union.score() > best.score()) ? union : best;
    }

    /** The plans of a $or's branches, each with the query's other conditions; null when one has none. */
    private static <P> Plan<P> orPlan(List<Index<P>> indexes, Document query, int depth) {
        if (!(query.get("$or") instanceof List<?> branches) || branches.isEmpty() || branches.size() > MAX_OR_BRANCHES) {
            return null;
        }
        Document outer = new Document();
        query.forEach((key, value) -> {
            if (!"$or".equals(key)) {
                outer.put(key, value);
            }
        });
        List<Plan<P>> plans = new ArrayList<>();
        int score = Integer.MAX_VALUE;
        int narrowing = Integer.MAX_VALUE;
        for (Object branch : branches) {
            if (!(branch instanceof Document)) {
                return null;
            }
            Document merged = new Document(outer);
            for (Map.Entry<String, Object> condition : ((Document) branch).entrySet()) {
                // A field named both outside the $or and in the branch: the merged query would need
                // two conditions on one key. The query is then read by its best single plan instead.
                if (merged.containsKey(condition.getKey())) {
                    return null;
                }
                merged.put(condition.getKey(), condition.getValue());
            }
            Plan<P> plan = plan(indexes, merged, depth + 1);
            if (plan == null) {
                return null;
            }
            plans.add(plan);
            score = Math.min(score, plan.score());
            narrowing = Math.min(narrowing, plan.narrowing());
        }
        return new Plan<>(null, null, null, plans, score, narrowing);
    }

    /**
     * The number of documents matching a query, from the entries of the secondary index that answers
     * it alone (SecondaryIndex.covered) and bounds the entries it reads most narrowly; -1 when none
     * does, or when another plan reads fewer (a unique index's point read: {_id, organization_id}),
     * and the documents must be read.
     */
    static <P> long coveredCount(List<Index<P>> indexes, Document query) {
        if (!ENABLED || query == null || query.isEmpty()) {
            return -1;
        }
        SecondaryIndex<P>.KeyTests best = null;
        for (Index<P> index : indexes) {
            if (index instanceof SecondaryIndex) {
                SecondaryIndex<P>.KeyTests covered = ((SecondaryIndex<P>) index).covered(query);
                if (covered != null && (best == null || covered.score() > best.score())) {
                    best = covered;
                }
            }
        }
        return best == null || best.score() < bestScore(indexes, query) ? -1 : best.count();
    }

    /** count(query, skip, limit) from a covered count, as mongo-java-server counts the documents it reads. */
    static int skipAndLimit(long count, int skip, int limit) {
        int left = (int) Math.max(0, count - Math.max(skip, 0));
        return limit > 0 ? Math.min(limit, left) : left;
    }

    /**
     * For a sorted query with a limit: the candidates read in the order of an index that follows the
     * sort (the keys after its equality prefix are the sort's fields, all ascending or all
     * descending), until `needed` (skip + limit) of them match the query, and then every entry tied
     * with the last one on the sort fields, so that the collection's own sort of these candidates
     * (stable, over the natural order) picks the same documents as after a scan. Null when no index
     * follows the sort.
     */
    static <P> List<P> orderedCandidates(List<Index<P>> indexes, Document query, Document orderBy, int needed,
                                         Comparator<P> naturalOrder, Predicate<P> matches) {
        if (!ENABLED || orderBy == null || orderBy.isEmpty() || needed <= 0 || orderBy.containsKey("$natural")) {
            return null;
        }
        List<String> sortFields = new ArrayList<>(orderBy.keySet());
        int direction = 0;
        for (Object value : orderBy.values()) {
            int d = value instanceof Number && ((Number) value).doubleValue() < 0 ? -1 : 1;
            if (direction != 0 && d != direction) {
                return null;
            }
            direction = d;
        }
        SecondaryIndex<P> best = null;
        SecondaryIndex.Bounds bestBounds = null;
        Iterator<Map.Entry<Object[], Object>> entries = null;
        for (Index<P> index : indexes) {
            if (!(index instanceof SecondaryIndex)) {
                continue;
            }
            SecondaryIndex<P> secondary = (SecondaryIndex<P>) index;
            SecondaryIndex.Bounds bounds = query == null || query.isEmpty() ? new SecondaryIndex.Bounds() : secondary.boundsFor(query);
            if (bounds == null) {
                bounds = new SecondaryIndex.Bounds();
            }
            if (best != null && bounds.score() <= bestBounds.score()) {
                continue;
            }
            var iterator = secondary.orderedEntries(bounds, direction < 0, sortFields);
            if (iterator != null) {
                best = secondary;
                bestBounds = bounds;
                entries = iterator;
            }
        }
        // An index that bounds the query better (a unique one, a longer equality prefix) reads fewer documents, sorted or not.
        if (entries == null || bestBounds.score() < bestScore(indexes, query)) {
            return null;
        }
        List<P> filtered = keyFiltered(indexes, query, needed, best.boundedFields(bestBounds));
        if (filtered != null) {
            filtered.sort(naturalOrder);
            return filtered;
        }
        List<P> positions = new ArrayList<>();
        int found = 0;
        List<Object> lastSortKey = null;
        int first = bestBounds.prefix.size();
        while (entries.hasNext()) {
            var entry = entries.next();
            List<Object> sortKey = new ArrayList<>();
            for (int i = first; i < first + sortFields.size(); i++) {
                sortKey.add(entry.getKey()[i]);
            }
            if (found >= needed && !sameValues(sortKey, lastSortKey)) {
                break;
            }
            for (P position : SecondaryIndex.<P>positionsOf(entry.getValue())) {
                if (matches.test(position)) {
                    positions.add(position);
                    found++;
                    lastSortKey = sortKey;
                }
            }
        }
        // In natural order: the collection's stable sort then breaks ties as it does after a scan.
        positions.sort(naturalOrder);
        return positions;
    }

    /**
     * For a sorted read with a limit, the documents an index's entries leave when they test
     * conditions beyond the index's bounds (SecondaryIndex.keyFilter), when they leave few: reading
     * those and sorting them is then cheaper than reading in the sort's order until `needed` match,
     * which reads every document when few match (`GET /v1/events?code=` with a rare code: all of
     * the organization's events). "Few" is at most the square root of needed times the documents
     * indexed (and at least needed): with m matches spread evenly over n documents, the ordered
     * read takes about needed * n / m of them and this one m, the same when m * m = needed * n
     * (n is the whole index's, an upper bound of the sorted read's range). Only an index whose
     * entries answer a condition on a field that the sorted read's bounds (`sortedBounds`) do not
     * restrict is tried. Null when no index filters, or more pass (the entries are read until then).
     */
    private static <P> List<P> keyFiltered(List<Index<P>> indexes, Document query, int needed, List<String> sortedBounds) {
        if (query == null || query.isEmpty()) {
            return null;
        }
        SecondaryIndex<P>.KeyTests best = null;
        for (Index<P> index : indexes) {
            if (index instanceof SecondaryIndex) {
                SecondaryIndex<P>.KeyTests filter = ((SecondaryIndex<P>) index).keyFilter(query);
                if (filter != null && filter.testsBeyond(sortedBounds) && (best == null || filter.answered() > best.answered()
                    || filter.answered() == best.answered() && filter.score() > best.score())) {
                    best = filter;
                }
            }
        }
        if (best == null) {
            return null;
        }
        int cap = (int) Math.max(needed, Math.min(Integer.MAX_VALUE - 1, Math.sqrt((double) needed * best.indexed())));
        return best.positions(cap);
    }

    /**
     * When the best plan for the query bounds one key only (an equality, a $in or a range on an
     * index's first key) and the query has conditions on other fields too: that key's name (the read
     * takes every document with that value and filters the rest). Null otherwise.
     */
    static <P> String onlyBoundKey(List<Index<P>> indexes, Document query) {
        if (query == null || query.size() < 2) {
            return null;
        }
        Plan<P> plan = plan(indexes, query, 0);
        return plan == null ? null : plan.onlyKey();
    }

    private static <P> int bestScore(List<Index<P>> indexes, Document query) {
        Plan<P> plan = query == null || query.isEmpty() ? null : plan(indexes, query, 0);
        return plan == null ? 0 : plan.score();
    }

    private static boolean sameValues(List<Object> a, List<Object> b) {
        if (a == null || b == null || a.size() != b.size()) {
            return false;
        }
        for (int i = 0; i < a.size(); i++) {
            if (ValueComparator.asc().compare(a.get(i), b.get(i)) != 0) {
                return false;
            }
        }
        return true;
    }

    /**
     * The query's conditions on the index's keys, when each is a plain value, or for the _id index
     * a $in of plain values (`{_id: {$in: [...]}, organization_id: ...}`: mongo-java-server's unique
     * index looks each value up; an _id is never an array, so each document has one key); null
     * otherwise.
     */
    private static <P> Document projectOnKeys(Index<P> index, Document query) {
        Document projected = new Document();
        for (IndexKey key : index.getKeys()) {
            Object value = query.get(key.getKey());
            boolean usable = SecondaryIndex.isPlainValue(value) || (isIdIndex(index) && SecondaryIndex.plainInValues(value) != null);
            if (!query.containsKey(key.getKey()) || !usable) {
                return null;
            }
            projected.put(key.getKey(), value);
        }
        return projected;
    }

    private static <P> boolean isIdIndex(Index<P> index) {
        return index.getKeys().size() == 1 && "_id".equals(index.getKeys().get(0).getKey());
    }
}
