// The queries the stand-in answers by reading a whole collection because no index helps: with
// MONGO_STAND_IN_SCAN_LOG=<n>, each collection and query shape is reported once, on stderr (the
// stand-in's log) or appended to MONGO_STAND_IN_SCAN_LOG_FILE, when the collection holds at least
// n documents. Off by default. A shape names the query's fields, operators and sort, never its
// values. A query that reads a whole collection on purpose (no conditions) is reported as `{}`.
// Also reported: a lookup of one document (findOne) that reads every document with one value of a
// key (all of an organization's customers, say) because no index narrows it further.

import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.bson.Document;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

final class ScanLog {

    /** The smallest collection whose scans are reported; negative when the log is off. */
    static final long MIN_DOCUMENTS = parse(System.getenv("MONGO_STAND_IN_SCAN_LOG"));

    /** Where reports go (MONGO_STAND_IN_SCAN_LOG_FILE, appended to): stderr, the stand-in's log, without it. */
    private static final Path FILE = System.getenv("MONGO_STAND_IN_SCAN_LOG_FILE") == null ? null
        : Path.of(System.getenv("MONGO_STAND_IN_SCAN_LOG_FILE"));

    private static final Set<String> REPORTED = ConcurrentHashMap.newKeySet();

    private ScanLog() {
    }

    static long parse(String value) {
        if (value == null || value.isBlank()) {
            return -1;
        }
        try {
            return Long.parseLong(value.trim());
        } catch (NumberFormatException e) {
            System.err.println("[stand-in] MONGO_STAND_IN_SCAN_LOG must be a number of documents, not \"" + value + "\": scans are not reported");
            return -1;
        }
    }

    /** Whether the log is on (the callers read a collection's size and indexes only then). */
    static final boolean ENABLED = MIN_DOCUMENTS >= 0;

    /**
     * Reports a scan of a collection (`database.collection`) of `documents` documents for this
     * query, once per collection and shape, when the collection is large enough, is not one of
     * mongo-java-server's own and none of `indexes` handles the query by itself (mongo-java-server's
     * own query then reads that index instead).
     */
    static void scanned(String collection, Document query, Document orderBy, long documents, List<? extends Index<?>> indexes) {
        // system.indexes and system.namespaces: mongo-java-server's own bookkeeping, not a client's query.
        if (!ENABLED || documents < MIN_DOCUMENTS || collection.contains(".system.") || indexes.stream().anyMatch(index -> index.canHandle(query))) {
            return;
        }
        report("scan", "scan of " + documents + " documents", collection, query, orderBy);
    }

    /**
     * Reports a lookup of one document (a read with a limit of 1: findOne) whose candidates are every
     * document with one value of a key, because no index narrows it further (QueryPlanner.onlyBoundKey):
     * say a customer by id or by a field no index has, read among all of its organization's. Once per
     * collection and shape, when the collection is large enough. (A sorted read that follows an
     * index's order stops at its first match: its callers do not report it.)
     */
    static <P> void lookedUp(String collection, Document query, Document orderBy, int limit, long documents, List<Index<P>> indexes) {
        if (!ENABLED || Math.abs(limit) != 1 || documents < MIN_DOCUMENTS || collection.contains(".system.")) {
            return;
        }
        String key = QueryPlanner.onlyBoundKey(indexes, query);
        if (key != null) {
            report("lookup", "lookup of one document by " + key + " alone, among " + documents + " documents", collection, query, orderBy);
        }
    }

    /** One report per kind, collection and query shape: `[stand-in] <what>: <collection> <shape>`. */
    private static void report(String kind, String what, String collection, Document query, Document orderBy) {
        String line = collection + " " + shape(query) + (orderBy == null || orderBy.isEmpty() ? "" : " sort " + sortShape(orderBy));
        if (REPORTED.add(kind + " " + line)) {
            String report = "[stand-in] " + what + ": " + line;
            if (FILE == null) {
                System.err.println(report);
                return;
            }
            try {
                Files.writeString(FILE, report + System.lineSeparator(), StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            } catch (IOException e) {
                System.err.println(report);
            }
        }
    }

    /** The fields and operators of a query ({a: eq, b: {$gte, $lt}, $or: [...]}), without values. */
    static String shape(Object value) {
        if (value instanceof Document) {
            Document document = (Document) value;
            List<String> parts = new ArrayList<>();
            for (Map.Entry<String, Object> entry : document.entrySet()) {
                String key = entry.getKey();
                Object inner = entry.getValue();
                if (key.startsWith("$")) {
                    boolean logical = key.equals("$or") || key.equals("$and") || key.equals("$nor");
                    parts.add(logical && inner instanceof List ? key + ": " + shapeList((List<?>) inner) : key);
                } else if (inner instanceof Document && isOperatorDocument((Document) inner)) {
                    parts.add(key + ": " + shape(inner));
                } else {
                    parts.add(key + ": eq");
                }
            }
            return "{" + String.join(", ", parts) + "}";
        }
        return "eq";
    }

    /** A sort's fields and directions ({period_started_at: 1, _id: -1}). */
    static String sortShape(Document orderBy) {
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, Object> entry : orderBy.entrySet()) {
            parts.add(entry.getKey() + ": " + entry.getValue());
        }
        return "{" + String.join(", ", parts) + "}";
    }

    private static String shapeList(List<?> values) {
        List<String> parts = new ArrayList<>();
        for (Object value : values) {
            parts.add(value instanceof Document ? shape(value) : "eq");
        }
        return "[" + String.join(", ", parts) + "]";
    }

    private static boolean isOperatorDocument(Document document) {
        return !document.isEmpty() && document.keySet().iterator().next().startsWith("$");
    }
}
