// How the H2 backend stores documents, index key tuples and ObjectIds: as BSON (issue 17).
//
// mongo-java-server's H2 maps use H2's ObjectDataType, which stores any class it does not know
// (a Document, a KeyValue, an ObjectId) by Java serialization, one ObjectOutputStream per value
// with its class descriptors. Profiled under single-event ingestion, reading and writing pages that
// way took more than half of the stand-in's CPU. This type stores those values as BSON behind a tag
// byte of its own (0x7D to 0x7F, above every tag ObjectDataType writes), and everything else as
// ObjectDataType does. It reads both: a page written before is read as it was written and stored in
// the new form the next time it is written. Ordering is ObjectDataType's (compare is not changed),
// so the keys of an existing file stay in order.
//
// A value BSON cannot hold exactly is stored as before (Java serialization). BSON dates have
// milliseconds: an Instant with a finer part is stored to the millisecond, as MongoDB stores it.

import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;
import de.bwaldvogel.mongo.wire.bson.BsonDecoder;
import de.bwaldvogel.mongo.wire.bson.BsonEncoder;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.h2.mvstore.WriteBuffer;
import org.h2.mvstore.type.ObjectDataType;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Instant;
import java.util.Collection;
import java.util.Map;

class BsonStorageType extends ObjectDataType {

    /** A single BSON value: its BSON type byte, then the value (an ObjectId, an Instant). */
    private static final byte VALUE = 0x7D;
    /** A KeyValue: the number of values, then each as a BSON type byte and value (0: Missing). */
    private static final byte TUPLE = 0x7E;
    /** A Document: its BSON bytes (which begin with their length). */
    private static final byte DOCUMENT = 0x7F;
    private static final byte MISSING = 0;

    @Override
    public void write(WriteBuffer buff, Object obj) {
        byte[] bson = encode(obj);
        if (bson == null) {
            super.write(buff, obj);
            return;
        }
        buff.put(bson);
    }

    /** The value's stored form with its tag, or null when it is stored as ObjectDataType stores it. */
    private static byte[] encode(Object obj) {
        if (!(obj instanceof Document || obj instanceof KeyValue || obj instanceof ObjectId || obj instanceof Instant)) {
            return null;
        }
        ByteBuf out = Unpooled.buffer(256);
        try {
            if (obj instanceof Document) {
                out.writeByte(DOCUMENT);
                BsonEncoder.encodeDocument((Document) obj, out);
            } else if (obj instanceof KeyValue) {
                KeyValue tuple = (KeyValue) obj;
                out.writeByte(TUPLE);
                out.writeIntLE(tuple.size());
                for (Object value : tuple) {
                    if (value instanceof Missing) {
                        out.writeByte(MISSING);
                    } else {
                        writeValue(value, out);
                    }
                }
            } else {
                out.writeByte(VALUE);
                writeValue(obj, out);
            }
            byte[] bytes = new byte[out.readableBytes()];
            out.readBytes(bytes);
            return bytes;
        } catch (RuntimeException notBson) {
            // A type BSON has no form for (or a Missing inside a document): stored as before.
            return null;
        } finally {
            out.release();
        }
    }

    private static void writeValue(Object value, ByteBuf out) {
        byte type = BsonEncoder.determineType(value);
        out.writeByte(type);
        BsonEncoder.encodeValue(type, value, out);
    }

    @Override
    public Object read(ByteBuffer buff) {
        byte tag = buff.get(buff.position());
        if (tag != DOCUMENT && tag != TUPLE && tag != VALUE) {
            return super.read(buff);
        }
        buff.get();
        // Big-endian like H2's own buffers; BSON's little-endian numbers are read with the *LE methods.
        ByteBuf in = Unpooled.wrappedBuffer(buff.duplicate().order(ByteOrder.BIG_ENDIAN));
        Object value;
        if (tag == DOCUMENT) {
            value = BsonDecoder.decodeBson(in);
        } else if (tag == TUPLE) {
            Object[] values = new Object[in.readIntLE()];
            for (int i = 0; i < values.length; i++) {
                byte type = in.readByte();
                values[i] = type == MISSING ? Missing.getInstance() : BsonDecoder.decodeValue(type, in);
            }
            value = new KeyValue(values);
        } else {
            value = BsonDecoder.decodeValue(in.readByte(), in);
        }
        buff.position(buff.position() + in.readerIndex());
        return value;
    }

    /**
     * The in-memory size H2 accounts for a value (its page cache and page splits use it): for
     * documents and tuples an estimate from their contents, without encoding them.
     */
    @Override
    public int getMemory(Object obj) {
        if (obj instanceof Document || obj instanceof KeyValue || obj instanceof ObjectId || obj instanceof Instant) {
            return estimate(obj, 0);
        }
        return super.getMemory(obj);
    }

    private static int estimate(Object value, int depth) {
        if (value instanceof String) {
            return 40 + ((String) value).length();
        }
        if (depth > 8) {
            return 64;
        }
        if (value instanceof Map) {
            int size = 48;
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                size += 32 + estimate(entry.getKey(), depth + 1) + estimate(entry.getValue(), depth + 1);
            }
            return size;
        }
        if (value instanceof Collection || value instanceof KeyValue) {
            int size = 32;
            for (Object element : (Iterable<?>) value) {
                size += 8 + estimate(element, depth + 1);
            }
            return size;
        }
        return 24;
    }
}
