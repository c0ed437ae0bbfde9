// The H2 (MVStore file) backend of mongo-java-server with real secondary indexes (SecondaryIndex)
// and the query planner of QueryPlanner. The indexes live in memory: when the file is reopened,
// each collection's indexes are opened again from its index descriptions and filled from its
// documents (AbstractMongoCollection.addIndex fills an empty index).

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.backend.h2.H2Backend;
import de.bwaldvogel.mongo.backend.h2.H2Collection;
import de.bwaldvogel.mongo.backend.h2.H2Database;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.NoopOplog;
import de.bwaldvogel.mongo.oplog.Oplog;
import de.bwaldvogel.mongo.backend.DatabaseResolver;
import io.netty.channel.Channel;
import org.h2.mvstore.Cursor;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

public class IndexedH2Backend extends H2Backend {

    /**
     * The store the databases open their maps in. H2Database keeps its own private; ours is needed
     * while H2Database's constructor opens the existing collections, before a field of a subclass
     * could be set. One backend per process (the launcher's).
     */
    private static MVStore store;

    /**
     * The store's page cache, in MiB (MONGO_STAND_IN_CACHE_MB, default 48, three times MVStore's
     * own): bigger helps inserts into large collections, but the secondary indexes live in the
     * same bounded heap (a million events' indexes take about 600 MiB of the default 1 GiB).
     */
    static final int CACHE_MB = Integer.parseInt(System.getenv().getOrDefault("MONGO_STAND_IN_CACHE_MB", "48"));

    public static IndexedH2Backend open(String fileName) {
        store = new MVStore.Builder().fileName(fileName).cacheSize(CACHE_MB).open();
        return new IndexedH2Backend(store);
    }

    private IndexedH2Backend(MVStore mvStore) {
        super(mvStore);
    }

    /**
     * The databases opened, by name. mongo-java-server's listDatabases (a `show dbs`, a database
     * tool's first request) opens each database again through openOrCreateDatabase instead of
     * taking the open one: in H2 a second instance of the database, whose collections build their
     * in-memory secondary indexes from every document again. With a million events that doubled
     * the heap the indexes take and ran the stand-in out of its 1 GiB. The open instance is
     * answered instead, unless it was dropped. Filled during the superclass's constructor (it opens
     * the stored databases), so created there on first use: the field must have no initializer
     * (not even `= null`), which would run after that constructor and empty it.
     */
    private volatile Map<String, Database> opened;

    @Override
    protected MongoDatabase openOrCreateDatabase(String databaseName) {
        Map<String, Database> databases = opened;
        if (databases == null) {
            synchronized (this) {
                if (opened == null) {
                    opened = new ConcurrentHashMap<>();
                }
                databases = opened;
            }
        }
        Database open = databases.get(databaseName);
        if (open != null && !open.dropped) {
            return open;
        }
        return databases.compute(databaseName,
            (name, current) -> current != null && !current.dropped ? current : new Database(name, getMvStore(), getCursorRegistry()));
    }

    /**
     * Marked dropped before mongo-java-server forgets it and drops it, so that a request naming it
     * meanwhile opens a new instance rather than the one being dropped.
     */
    @Override
    public void dropDatabase(String databaseName) {
        Map<String, Database> databases = opened;
        Database open = databases == null ? null : databases.get(databaseName);
        if (open != null) {
            open.dropped = true;
        }
        super.dropDatabase(databaseName);
    }

    @Override
    public void close() {
        super.close();
        if (opened != null) {
            opened.clear();
        }
    }

    static final class Database extends H2Database {
        /** Dropped: opened again, it is a new instance (IndexedH2Backend.openOrCreateDatabase). */
        private volatile boolean dropped;

        Database(String databaseName, MVStore mvStore, CursorRegistry cursorRegistry) {
            super(databaseName, mvStore, cursorRegistry);
        }

        @Override
        public void drop(Oplog oplog) {
            dropped = true;
            super.drop(oplog);
        }

        @Override
        protected MongoCollection<Object> openOrCreateCollection(String collectionName, CollectionOptions options) {
            String fullName = getFullCollectionNamespace(collectionName);
            // Documents (and ObjectId keys) stored as BSON rather than by Java serialization (BsonStorageType).
            MVMap<Object, Document> dataMap = store.openMap("databases." + fullName,
                new MVMap.Builder<Object, Document>().keyType(new BsonStorageType()).valueType(new BsonStorageType()));
            MVMap<String, Object> metaMap = store.openMap("meta." + fullName);
            return new Collection(this, collectionName, options, dataMap, metaMap, cursorRegistry);
        }

        @Override
        public Document handleCommand(Channel channel, String command, Document query, DatabaseResolver databaseResolver, Oplog oplog) {
            Document counted = CountPipeline.answer(command, query, name -> resolveCollection(name, false), this::getFullCollectionNamespace);
            return counted != null ? counted : super.handleCommand(channel, command, query, databaseResolver, oplog);
        }

        @Override
        protected Index<Object> openOrCreateSecondaryIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
            return new SecondaryIndex<>(indexName, keys);
        }

        /** H2's name of an index's map (H2Database.mapNameForIndex). */
        private String indexMapName(String collectionName, String indexName) {
            return getFullCollectionNamespace(collectionName) + "._index_" + indexName;
        }

        @Override
        protected Index<Object> openOrCreateUniqueIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
            return TupleUniqueIndex.open(store, indexMapName(collectionName, indexName), indexName, keys, sparse);
        }

        @Override
        protected void dropIndex(MongoCollection<Object> collection, String indexName) {
            super.dropIndex(collection, indexName);
            String name = TupleUniqueIndex.mapName(indexMapName(collection.getCollectionName(), indexName));
            if (store.hasMap(name)) {
                store.removeMap(store.openMap(name, new MVMap.Builder<KeyValue, Object>().keyType(new TupleUniqueIndex.TupleKeyType())));
            }
        }
    }

    static final class Collection extends H2Collection {
        private final MVMap<Object, Document> dataMap;

        Collection(MongoDatabase database, String collectionName, CollectionOptions options, MVMap<Object, Document> dataMap,
                   MVMap<String, Object> metaMap, CursorRegistry cursorRegistry) {
            super(database, collectionName, options, dataMap, metaMap, cursorRegistry);
            this.dataMap = dataMap;
        }

        /** A count that an index's entries answer alone reads no document (QueryPlanner.coveredCount). */
        @Override
        public int count(Document query, int skip, int limit) {
            long covered = QueryPlanner.coveredCount(getIndexes(), query);
            return covered < 0 ? super.count(query, skip, limit) : QueryPlanner.skipAndLimit(covered, skip, limit);
        }

        @Override
        protected QueryResult queryDocuments(Document query, Document orderBy, int numberToSkip, int limit, int batchSize,
                                             Document fieldSelector) {
            // The natural order of a scan is the data map's key order.
            if (limit != 0) {
                List<Object> byId = idOrderedCandidates(query, orderBy, numberToSkip + Math.abs(limit));
                if (byId != null) {
                    return matchDocuments(query, byId, orderBy, numberToSkip, limit, batchSize, fieldSelector);
                }
                List<Object> ordered = QueryPlanner.orderedCandidates(getIndexes(), query, orderBy, numberToSkip + Math.abs(limit),
                    dataMap.getKeyType()::compare, position -> documentMatchesQuery(getDocument(position), query));
                if (ordered != null) {
                    return matchDocuments(query, ordered, orderBy, numberToSkip, limit, batchSize, fieldSelector);
                }
            }
            List<Object> positions = QueryPlanner.candidates(getIndexes(), query, dataMap.getKeyType()::compare);
            if (positions == null) {
                if (ScanLog.ENABLED) {
                    ScanLog.scanned(getFullName(), query, orderBy, count(), getIndexes());
                }
                return super.queryDocuments(query, orderBy, numberToSkip, limit, batchSize, fieldSelector);
            }
            if (ScanLog.ENABLED) {
                ScanLog.lookedUp(getFullName(), query, orderBy, limit, count(), getIndexes());
            }
            if (isNaturalDescending(orderBy)) {
                Collections.reverse(positions);
            }
            return matchDocuments(query, positions, orderBy, numberToSkip, limit, batchSize, fieldSelector);
        }

        /**
         * A deleteMany that holds one matching document at a time. mongo-java-server's own reads
         * every match into a list before it removes any (a million events once ran the stand-in out
         * of its heap). First the positions: an index's candidates for the query, else those of the
         * matches of one pass over the data map in key order. All are read before the first
         * removal: an iterator left open across removals reads a version of the map whose pages the
         * store may already have freed ("Chunk not found"). Then each is read, matched against the
         * whole query and removed. A delete with a limit (deleteOne) is mongo-java-server's: it
         * holds one document.
         */
        @Override
        public synchronized int deleteDocuments(Document selector, int limit, Oplog oplog) {
            if (limit != 0) {
                return super.deleteDocuments(selector, limit, oplog);
            }
            List<Object> positions = QueryPlanner.candidates(getIndexes(), selector, dataMap.getKeyType()::compare);
            if (positions == null) {
                positions = handlingIndexPositions(selector);
            }
            if (positions == null) {
                if (ScanLog.ENABLED) {
                    // No index handles the selector by itself (handlingIndexPositions): reported as a scan.
                    ScanLog.scanned(getFullName(), selector, null, count(), List.of());
                }
                positions = new ArrayList<>();
                Cursor<Object, Document> cursor = dataMap.cursor(null);
                while (cursor.hasNext()) {
                    Object position = cursor.next();
                    if (documentMatchesQuery(cursor.getValue(), selector)) {
                        positions.add(position);
                    }
                }
            }
            boolean logged = !(oplog instanceof NoopOplog);
            List<Object> deletedIds = new ArrayList<>();
            int deleted = 0;
            for (Object position : positions) {
                Document document = getDocument(position);
                if (document == null || !documentMatchesQuery(document, selector)) {
                    continue;
                }
                if (logged) {
                    deletedIds.add(document.get(getIdField()));
                }
                removeDocument(document);
                deleted++;
            }
            oplog.handleDelete(getFullName(), selector, deletedIds);
            return deleted;
        }

        /**
         * The positions of the first index that handles the whole query by itself, as
         * mongo-java-server's own query picks one (an _id index and `{_id: {$in: [...]}}`, which the
         * planner leaves to it); null when none does. Only for `$in` lists of plain values: a regular
         * expression in one is looked up as a key by mongo-java-server's index (it would find nothing),
         * and the scan matches it. Off with the planner (STAND_IN_INDEXES=off): then a delete scans.
         */
        private List<Object> handlingIndexPositions(Document query) {
            if (!QueryPlanner.ENABLED) {
                return null;
            }
            for (Object condition : query.values()) {
                if (condition instanceof Document && ((Document) condition).get("$in") instanceof java.util.Collection<?> values
                    && !values.stream().allMatch(SecondaryIndex::isPlainValue)) {
                    return null;
                }
            }
            for (Index<Object> index : getIndexes()) {
                if (index.canHandle(query)) {
                    List<Object> positions = new ArrayList<>();
                    index.getPositions(query).forEach(positions::add);
                    return positions;
                }
            }
            return null;
        }

        /**
         * A page sorted by _id alone, maybe after (or before) a given _id, like the reconciler's
         * `{_id: {$gt: last}}` sorted by `{_id: 1}`: the data map is keyed by _id, so when every _id is
         * a string its key order is the sort's (ObjectDataType keeps a type's keys together and
         * orders strings by String.compareTo, as ValueComparator does). The documents are read from
         * the bound in that order until `needed` of them match, instead of all of them being read and
         * sorted. Null when the query or the collection is not of that kind.
         */
        private List<Object> idOrderedCandidates(Document query, Document orderBy, int needed) {
            if (!QueryPlanner.ENABLED || orderBy == null || orderBy.size() != 1 || needed <= 0
                || !(orderBy.get("_id") instanceof Number)) {
                return null;
            }
            boolean reverse = ((Number) orderBy.get("_id")).doubleValue() < 0;
            if (!(dataMap.firstKey() instanceof String) || !(dataMap.lastKey() instanceof String)) {
                return null;
            }
            // The bounds only say where to start and stop reading: the query itself decides what matches.
            String lower = null;
            String upper = null;
            Object condition = query == null ? null : query.get("_id");
            if (condition != null) {
                if (!(condition instanceof Document) || ((Document) condition).isEmpty()) {
                    return null; // an equality: the _id index answers it
                }
                for (Map.Entry<String, Object> bound : ((Document) condition).entrySet()) {
                    if (!(bound.getValue() instanceof String)) {
                        return null;
                    }
                    switch (bound.getKey()) {
                        case "$gt", "$gte" -> lower = (String) bound.getValue();
                        case "$lt", "$lte" -> upper = (String) bound.getValue();
                        default -> {
                            return null;
                        }
                    }
                }
            }
            Cursor<Object, Document> cursor = reverse ? dataMap.cursor(upper, lower, true) : dataMap.cursor(lower, upper, false);
            List<Object> positions = new ArrayList<>();
            while (positions.size() < needed && cursor.hasNext()) {
                Object key = cursor.next();
                if (documentMatchesQuery(cursor.getValue(), query)) {
                    positions.add(key);
                }
            }
            return positions;
        }
    }
}
