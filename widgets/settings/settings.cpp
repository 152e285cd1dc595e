#include "widgets/settings/settings.h"

#include <QDir>
#include <QSettings>
#include <algorithm>

namespace shardwidgets {

namespace key {
const QString recentFolders = QStringLiteral("recent/folders");
const QString windowGeometry = QStringLiteral("window/geometry");
const QString windowState = QStringLiteral("window/state");
const QString windowStateVersion = QStringLiteral("window/stateVersion");
const QString lastProfile = QStringLiteral("planner/lastProfile");
const QString lastExportDirectory = QStringLiteral("export/lastDirectory");
const QString fastVerify = QStringLiteral("verify/fast");
// One entry per folder; the folder's path, hex-encoded, is the key (a path's slashes would make
// QSettings groups of it).
QString expectedWorldSize(const QString& folder)
{
    return QStringLiteral("expectedWorldSize/") + QString::fromLatin1(folder.toUtf8().toHex());
}
const QString verifyThreads = QStringLiteral("verify/threads");
} // namespace key

Settings::Settings() : m_settings(std::make_unique<QSettings>()) {}

Settings::Settings(const QString& iniFile)
    : m_settings(std::make_unique<QSettings>(iniFile, QSettings::IniFormat))
{
}

Settings::~Settings() = default;

QStringList Settings::recentFolders() const
{
    QStringList folders = m_settings->value(key::recentFolders).toStringList();
    folders.removeAll(QString());
    if (folders.size() > kMaxRecentFolders)
        folders.resize(kMaxRecentFolders);
    return folders;
}

void Settings::addRecentFolder(const QString& path)
{
    const QString clean = QDir::cleanPath(path);
    if (clean.isEmpty())
        return;
    QStringList folders = recentFolders();
    folders.removeAll(clean);
    folders.prepend(clean);
    while (folders.size() > kMaxRecentFolders)
        folders.removeLast();
    m_settings->setValue(key::recentFolders, folders);
}

void Settings::removeRecentFolder(const QString& path)
{
    QStringList folders = recentFolders();
    folders.removeAll(QDir::cleanPath(path));
    m_settings->setValue(key::recentFolders, folders);
}

void Settings::clearRecentFolders()
{
    m_settings->remove(key::recentFolders);
}

QByteArray Settings::windowGeometry() const
{
    return m_settings->value(key::windowGeometry).toByteArray();
}

void Settings::setWindowGeometry(const QByteArray& geometry)
{
    m_settings->setValue(key::windowGeometry, geometry);
}

QByteArray Settings::windowState() const
{
    if (m_settings->value(key::windowStateVersion, -1).toInt() != kWindowStateVersion)
        return {};
    return m_settings->value(key::windowState).toByteArray();
}

void Settings::setWindowState(const QByteArray& state)
{
    m_settings->setValue(key::windowState, state);
    m_settings->setValue(key::windowStateVersion, kWindowStateVersion);
}

QString Settings::lastProfile() const
{
    return m_settings->value(key::lastProfile).toString();
}

void Settings::setLastProfile(const QString& path)
{
    m_settings->setValue(key::lastProfile, path);
}

QString Settings::lastExportDirectory() const
{
    return m_settings->value(key::lastExportDirectory, QDir::homePath()).toString();
}

void Settings::setLastExportDirectory(const QString& path)
{
    m_settings->setValue(key::lastExportDirectory, path);
}

bool Settings::fastVerify() const
{
    return m_settings->value(key::fastVerify, false).toBool();
}

int Settings::expectedWorldSize(const QString& folder) const
{
    return std::max(0, m_settings->value(key::expectedWorldSize(folder), 0).toInt());
}

void Settings::setExpectedWorldSize(const QString& folder, int worldSize)
{
    if (worldSize > 0)
        m_settings->setValue(key::expectedWorldSize(folder), worldSize);
    else
        m_settings->remove(key::expectedWorldSize(folder));
}

void Settings::setFastVerify(bool fast)
{
    m_settings->setValue(key::fastVerify, fast);
}

int Settings::verifyThreads() const
{
    return std::max(0, m_settings->value(key::verifyThreads, 0).toInt());
}

void Settings::setVerifyThreads(int threads)
{
    m_settings->setValue(key::verifyThreads, std::max(0, threads));
}

void Settings::sync()
{
    m_settings->sync();
}

} // namespace shardwidgets
